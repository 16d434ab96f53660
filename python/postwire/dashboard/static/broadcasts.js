// A broadcast's live progress: while it is scheduled, queued or sending, ask for its status
// and counts every few seconds and update them on the page. The page shows the same numbers
// without this script; a reload gives the latest.
(function () {
  "use strict";
  const INTERVAL_MS = 2000;
  // A scheduled broadcast changes only when its time comes: asked about less often.
  const SCHEDULED_INTERVAL_MS = 15000;

  function show(section, body) {
    const status = section.querySelector("[data-status]");
    if (status) {
      status.textContent = body.status;
    }
    const badge = document.getElementById("broadcast-status");
    if (badge) {
      badge.textContent = body.status;
      badge.className = "badge status-" + body.status;
    }
    for (const cell of section.querySelectorAll("[data-count]")) {
      const value = body.counts[cell.dataset.count];
      if (value !== undefined) {
        cell.textContent = String(value);
      }
    }
    const note = document.getElementById("progress-note");
    if (note) {
      note.textContent = body.live ? "Updating live." : "Finished " + body.finished_at + ".";
    }
    if (!body.live) {
      // Nothing left to stop.
      for (const form of section.querySelectorAll(".cancel-form")) {
        form.classList.add("hidden");
      }
    }
  }

  async function poll(section) {
    let live = true;
    let interval = INTERVAL_MS;
    try {
      const response = await fetch(section.dataset.progressUrl, {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      });
      if (response.ok) {
        const body = await response.json();
        if (section.dataset.renderedStatus === "scheduled" && body.status !== "scheduled") {
          // Its time came (or it was canceled elsewhere): the page's forms are another's now.
          window.location.reload();
          return;
        }
        show(section, body);
        live = body.live;
        interval = body.status === "scheduled" ? SCHEDULED_INTERVAL_MS : INTERVAL_MS;
      }
    } catch (error) {
      // The server restarting or the network away: try again at the next tick.
    }
    if (live) {
      window.setTimeout(() => poll(section), interval);
    }
  }

  // The schedule form starts at the browser's own time zone when the list has it, and a
  // scheduled time (UTC on the page) is also given on the browser's clock.
  function useBrowserZone() {
    const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    const choice = document.getElementById("schedule-zone");
    if (choice && zone && Array.from(choice.options).some((option) => option.value === zone)) {
      choice.value = zone;
    }
    if (!zone || zone === "UTC") {
      return;
    }
    const format = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
    for (const node of document.querySelectorAll("time[data-local-time]")) {
      const moment = new Date(node.getAttribute("datetime"));
      if (!Number.isNaN(moment.getTime())) {
        const local = document.createElement("span");
        local.className = "muted local-time";
        local.textContent = ` (${format.format(moment)} ${zone})`;
        node.after(local);
      }
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    useBrowserZone();
    const section = document.getElementById("progress");
    if (section && section.hasAttribute("data-live")) {
      window.setTimeout(() => poll(section), INTERVAL_MS);
    }
  });
})();

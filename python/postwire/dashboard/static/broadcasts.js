// A broadcast's live progress: while it is scheduled, queued or sending, ask for its status
// and counts every few seconds and update them on the page. The page shows the same numbers
// without this script; a reload gives the latest.
(function () {
  "use strict";
  const INTERVAL_MS = 2000;

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
    try {
      const response = await fetch(section.dataset.progressUrl, {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      });
      if (response.ok) {
        const body = await response.json();
        show(section, body);
        live = body.live;
      }
    } catch (error) {
      // The server restarting or the network away: try again at the next tick.
    }
    if (live) {
      window.setTimeout(() => poll(section), INTERVAL_MS);
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    const section = document.getElementById("progress");
    if (section && section.hasAttribute("data-live")) {
      window.setTimeout(() => poll(section), INTERVAL_MS);
    }
  });
})();

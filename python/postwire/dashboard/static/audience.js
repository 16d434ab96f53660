// A contact import's live progress: while it runs, ask for its counts every second and show
// them; once it is done, load the page again to show the refused rows. The page shows the
// counts of its load without this.
(function () {
  "use strict";
  const INTERVAL_MS = 1000;

  function start() {
    const box = document.getElementById("import-progress");
    if (!box || box.dataset.done === "true") {
      return;
    }
    const url = box.dataset.progressUrl;
    const status = document.getElementById("import-status");
    const running = document.getElementById("import-running");
    if (running) {
      running.textContent = "The counts update as the import runs.";
    }

    async function poll() {
      let body;
      try {
        const response = await fetch(url, {
          headers: { Accept: "application/json" },
          credentials: "same-origin",
        });
        if (!response.ok) {
          return true;
        }
        body = await response.json();
      } catch {
        return true; // a lost request: try again at the next tick
      }
      for (const element of box.querySelectorAll("[data-count]")) {
        const value = body.counts[element.dataset.count];
        if (typeof value === "number") {
          element.textContent = value.toLocaleString("en-US");
        }
      }
      if (status) {
        status.textContent = body.status_words;
        status.className = "badge status-" + body.status;
      }
      if (body.done) {
        box.dataset.done = "true";
        window.location.reload();
        return false;
      }
      return true;
    }

    async function tick() {
      if (await poll()) {
        window.setTimeout(tick, INTERVAL_MS);
      }
    }
    window.setTimeout(tick, INTERVAL_MS);
  }

  document.addEventListener("DOMContentLoaded", start);
})();

// Live statuses on the Emails pages: every few seconds, ask for the last_event of the emails
// shown whose status may still change, and update their badges. Reading needs none of this.
(function () {
  "use strict";
  const SETTLED = new Set(["delivered", "bounced", "complained", "canceled", "suppressed", "clicked"]);
  const INTERVAL_MS = 5000;

  function rows() {
    return Array.from(document.querySelectorAll("[data-email-id]"));
  }

  function label(status) {
    return status.replace(/_/g, " ");
  }

  async function refresh() {
    const pending = rows().filter((row) => {
      const badge = row.querySelector("[data-status]");
      return badge && !SETTLED.has(badge.dataset.current || badge.textContent.trim().replace(/ /g, "_"));
    });
    if (pending.length === 0) {
      return false;
    }
    const params = new URLSearchParams();
    pending.forEach((row) => params.append("id", row.dataset.emailId));
    const response = await fetch("/emails/status?" + params.toString(), {
      headers: { Accept: "application/json" },
      credentials: "same-origin",
    });
    if (!response.ok) {
      return false;
    }
    const body = await response.json();
    pending.forEach((row) => {
      const status = body.statuses[row.dataset.emailId];
      const badge = row.querySelector("[data-status]");
      if (!status || !badge) {
        return;
      }
      const before = badge.dataset.current || badge.textContent.trim().replace(/ /g, "_");
      if (status !== before) {
        badge.className = "badge status-" + status;
        badge.textContent = label(status);
        badge.dataset.current = status;
        const note = row.querySelector("[data-live-note]");
        if (note) {
          note.hidden = false;
        }
      }
    });
    return true;
  }

  function loop() {
    refresh()
      .then((more) => {
        if (more) {
          window.setTimeout(loop, INTERVAL_MS);
        }
      })
      .catch(() => window.setTimeout(loop, INTERVAL_MS * 4));
  }

  document.addEventListener("DOMContentLoaded", () => window.setTimeout(loop, INTERVAL_MS));
})();

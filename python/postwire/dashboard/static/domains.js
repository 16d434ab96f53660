// A domain's page while its records are being checked: the statuses refresh by themselves
// (the page's own HTML, fetched again) until no record is pending. Without this script, a
// reload shows the same.
"use strict";

const REFRESH_MS = 3000;
const GIVE_UP_MS = 120000;

document.addEventListener("DOMContentLoaded", () => {
  const started = Date.now();
  const pending = () =>
    document.querySelector("[data-domain-status='pending'], [data-record-status='pending']") !== null;

  async function refresh() {
    if (!pending() || Date.now() - started > GIVE_UP_MS) return;
    try {
      const answer = await fetch(window.location.href, { credentials: "same-origin" });
      if (!answer.ok) return;
      const fresh = new DOMParser().parseFromString(await answer.text(), "text/html");
      // The badge and each record's status cell only: the copy buttons keep their handlers.
      const parts = [["[data-domain-status]", document.querySelector("[data-domain-status]")]];
      for (const cell of document.querySelectorAll("[data-record-key]")) {
        parts.push([`[data-record-key="${CSS.escape(cell.dataset.recordKey)}"]`, cell]);
      }
      for (const [selector, now] of parts) {
        const then = fresh.querySelector(selector);
        if (now && then) now.replaceWith(document.importNode(then, true));
      }
    } catch {
      return;  // offline or signed out: a reload will tell
    }
    window.setTimeout(refresh, REFRESH_MS);
  }
  window.setTimeout(refresh, REFRESH_MS);
});

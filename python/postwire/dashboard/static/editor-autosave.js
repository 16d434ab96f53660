// Autosave of the broadcast editor: a debounced JSON POST with the CSRF header, one request at
// a time, a status line that says where the save stands, and a last send when the page is left.
// The server saves what it can and lists the values it refused (kept as saved): the page marks
// them, and sends them again with every save until they are fixed.
"use strict";

window.PostwireEditor = window.PostwireEditor || {};

(() => {
  const SAVE_DELAY_MS = 700;
  const RETRY_MS = 5000;

  class Autosave {
    // `body(revision)`: the JSON to send; `onSaved(refused)`: runs after each save the server
    // took, with the values it refused; `onState()`: runs whenever the status changes.
    // `describe(refusal)`: a refused value's name, for the status line.
    constructor({ url, csrf, revision, status, body, onSaved, onState, describe }) {
      Object.assign(this, { url, csrf, revision, status, body, onSaved, onState, describe });
      this.refused = [];
      this.savedAt = null;
      this.timer = null;
      this.inFlight = false;
      this.again = false;
      this.dirty = false;
      this.stopped = false; // a refusal that only a reload can cure (409, 403)
      window.addEventListener("beforeunload", (event) => {
        if (!this.dirty && !this.inFlight) return;
        event.preventDefault();
        event.returnValue = ""; // what older browsers look at to ask
      });
      // Leaving with a change not yet sent: send it anyway (the browser finishes the request).
      window.addEventListener("pagehide", () => {
        if (this.dirty && !this.stopped && !this.inFlight) this.request({ keepalive: true });
      });
    }

    show(text, state) {
      this.status.textContent = text;
      this.status.dataset.state = state;
      this.onState();
    }

    // Whether the editor holds edits the saved broadcast does not have.
    ahead() {
      return this.dirty || this.inFlight || this.refused.length > 0;
    }

    schedule() {
      if (this.stopped) return;
      this.dirty = true;
      this.show("Unsaved changes", "pending");
      window.clearTimeout(this.timer);
      this.timer = window.setTimeout(() => this.save(), SAVE_DELAY_MS);
    }

    request(extra = {}) {
      return fetch(this.url, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRF-Token": this.csrf },
        body: this.body(this.revision),
        ...extra,
      });
    }

    async save() {
      window.clearTimeout(this.timer);
      if (this.stopped) return;
      if (this.inFlight) {
        this.again = true;
        return;
      }
      this.inFlight = true;
      this.dirty = false;
      this.show("Saving…", "saving");
      try {
        const answer = await this.request();
        const reply = await answer.json().catch(() => ({}));
        if (answer.ok) {
          this.revision = reply.revision;
          this.refused = reply.refused || [];
          this.savedAt = new Date().toLocaleTimeString();
          this.inFlight = false;
          if (this.dirty) this.show("Unsaved changes", "pending");
          else if (this.refused.length) {
            const names = this.refused.map((refusal) => this.describe(refusal)).join(", ");
            this.show(`Saved at ${this.savedAt}, except ${names}: see the marked ${this.refused.length > 1 ? "fields" : "field"}.`, "partial");
          } else this.show(`Saved at ${this.savedAt}`, "saved");
          this.onSaved(this.refused);
        } else {
          this.dirty = true;
          this.show(`Not saved: ${reply.error || `the server answered ${answer.status}`}`, "error");
          if (answer.status === 409 || answer.status === 403) this.stopped = true;
        }
      } catch (error) {
        this.dirty = true;
        this.show("Not saved: Postwire could not be reached. Retrying…", "error");
        this.timer = window.setTimeout(() => this.save(), RETRY_MS);
      } finally {
        this.inFlight = false;
        if (this.again) {
          this.again = false;
          this.save();
        }
      }
    }
  }

  window.PostwireEditor.Autosave = Autosave;
})();

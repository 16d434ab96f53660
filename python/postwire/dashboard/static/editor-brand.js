// The brand kit page: a logo chosen from the computer is uploaded to Postwire (the same upload
// the editor's image blocks use) and its address put in the form; saving stays the form's.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("brand-form");
  const file = document.getElementById("brand-logo-file");
  if (!form || !file) return;
  const status = document.getElementById("logo-upload-status");
  file.addEventListener("change", async () => {
    const chosen = file.files && file.files[0];
    if (!chosen) return;
    status.textContent = "Uploading…";
    const body = new FormData();
    body.append("file", chosen);
    try {
      const answer = await fetch("/broadcasts/images", {
        method: "POST",
        credentials: "same-origin",
        headers: { "X-CSRF-Token": form.elements.csrf_token.value },
        body,
      });
      const reply = await answer.json().catch(() => ({}));
      if (!answer.ok || !reply.url) {
        status.textContent = `Not uploaded: ${reply.error || `the server answered ${answer.status}`}`;
        return;
      }
      form.elements.logo_url.value = reply.url;
      if (reply.width) form.elements.logo_width.value = Math.max(16, Math.min(600, Number(reply.width)));
      status.textContent = `Uploaded ${chosen.name}. Save the brand kit to use it.`;
    } catch (error) {
      status.textContent = "Not uploaded: Postwire could not be reached.";
    }
  });
});

// The brand kit page: a logo chosen from the computer is uploaded to Postwire (the same upload
// the editor's image blocks use) and its address put in the form; saving stays the form's.
// The logo's thumbnail follows its address, alt text and width as they are typed.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("brand-form");
  const file = document.getElementById("brand-logo-file");
  if (!form || !file) return;
  const status = document.getElementById("logo-upload-status");
  const thumb = document.getElementById("brand-logo-thumb");
  const image = document.getElementById("brand-logo-image");
  const note = document.getElementById("brand-logo-note");
  const fields = form.elements;

  function showLogo() {
    const address = fields.logo_url.value.trim();
    const url = window.PostwireUploads.thumbnailUrl(address, thumb.dataset.uploadedImages);
    image.alt = fields.logo_alt.value;
    const width = Number(fields.logo_width.value);
    if (width >= 16 && width <= 600) image.width = width;
    if (url) {
      if (image.getAttribute("src") !== url) image.src = url;
      image.hidden = false;
      note.textContent = fields.logo_alt.value.trim() ? "The logo as uploaded." : "The logo as uploaded: add its alt text.";
    } else {
      image.hidden = true;
      image.removeAttribute("src");
      note.textContent = address ? "An image at another address shows in the sample only." : "No logo yet.";
    }
  }
  for (const name of ["logo_url", "logo_alt", "logo_width"]) {
    fields[name].addEventListener("input", showLogo);
  }

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
        headers: { "X-CSRF-Token": fields.csrf_token.value },
        body,
      });
      const reply = await answer.json().catch(() => ({}));
      if (!answer.ok || !reply.url) {
        status.textContent = `Not uploaded: ${reply.error || `the server answered ${answer.status}`}`;
        return;
      }
      fields.logo_url.value = reply.url;
      if (reply.width) fields.logo_width.value = Math.max(16, Math.min(600, Number(reply.width)));
      showLogo();
      status.textContent = `Uploaded ${chosen.name}. Save the brand kit to use it.`;
    } catch (error) {
      status.textContent = "Not uploaded: Postwire could not be reached.";
    }
  });
});

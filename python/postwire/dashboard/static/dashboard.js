// The dashboard's shared behaviour; every page works without it, this only improves.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  // Copy buttons: <button class="copy" data-copy="text">.
  for (const button of document.querySelectorAll("[data-copy]")) {
    button.addEventListener("click", async (event) => {
      event.preventDefault();
      try {
        await navigator.clipboard.writeText(button.dataset.copy);
        button.classList.add("copied");
        setTimeout(() => button.classList.remove("copied"), 1500);
      } catch {
        window.prompt("Copy:", button.dataset.copy);
      }
    });
  }
  // Selects that submit their form on change (the team menu); their button is then not needed.
  for (const select of document.querySelectorAll("select[data-autosubmit]")) {
    select.addEventListener("change", () => select.form.requestSubmit());
  }
  for (const element of document.querySelectorAll("[data-hide-with-js]")) {
    element.classList.add("hidden");
  }
  // Forms that ask first: <form data-confirm="Delete this domain?">.
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }
});

// The mapping step of a contact import: the key field of a column is shown only while the
// column is set to become a new contact property. Without this script every key field shows.
(function () {
  "use strict";

  function follow(select) {
    const input = document.getElementById(select.dataset.newKey);
    const row = input && input.closest(".new-key");
    if (row) {
      row.hidden = !select.value.startsWith("new.");
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    for (const select of document.querySelectorAll("select[data-new-key]")) {
      follow(select);
      select.addEventListener("change", function () {
        follow(select);
      });
    }
  });
})();

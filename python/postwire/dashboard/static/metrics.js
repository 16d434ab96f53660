// The Metrics page without a reload where it helps: the custom dates show only for a custom
// range, changing a filter applies it (one of domain, broadcast and tag at a time), and a
// chart's bar or point shows its value at once (the SVG's own <title> tooltips are what shows
// without JavaScript).
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var form = document.querySelector(".metrics-filters");
    if (!form) return;
    document.body.classList.add("js-metrics");
    var range = form.querySelector("#metrics-range");
    var dates = form.querySelectorAll(".custom-dates");
    function showDates() {
      dates.forEach(function (row) { row.classList.toggle("off", range.value !== "custom"); });
    }
    showDates();
    // Counts are kept per domain, per broadcast and per tag, not per combination: choosing
    // one of them clears the other two.
    var scopes = ["#metrics-domain", "#metrics-broadcast", "#metrics-tag"].map(function (id) {
      return form.querySelector(id);
    }).filter(Boolean);
    form.querySelectorAll("select").forEach(function (select) {
      select.addEventListener("change", function () {
        if (scopes.indexOf(select) >= 0 && select.value) {
          scopes.forEach(function (other) { if (other !== select) other.value = ""; });
        }
        showDates();
        if (select !== range || range.value !== "custom") form.submit();
      });
    });

    var tip = document.createElement("div");
    tip.className = "chart-tip hidden";
    tip.setAttribute("role", "status");
    document.body.appendChild(tip);
    document.querySelectorAll("svg.chart .bar, svg.chart .dot").forEach(function (mark) {
      var title = mark.querySelector("title");
      if (!title) return;
      var text = title.textContent;
      mark.addEventListener("mouseenter", function () {
        tip.textContent = text;
        tip.classList.remove("hidden");
      });
      mark.addEventListener("mousemove", function (event) {
        tip.style.left = event.clientX + 12 + "px";
        tip.style.top = event.clientY + 12 + "px";
      });
      mark.addEventListener("mouseleave", function () { tip.classList.add("hidden"); });
    });
  });
})();

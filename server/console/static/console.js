// hookwise console: the little JavaScript it has (htmx does the rest). No inline script anywhere.
(function () {
  "use strict";
  // Every htmx request carries the page's CSRF token.
  document.addEventListener("htmx:configRequest", function (event) {
    var meta = document.querySelector('meta[name="csrf-token"]');
    if (meta && meta.content) {
      event.detail.headers["X-CSRF-Token"] = meta.content;
    }
  });
  // Buttons that ask before they act: <button data-confirm="...">.
  document.addEventListener("submit", function (event) {
    var button = event.submitter;
    var question = button && button.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
    }
  });
})();

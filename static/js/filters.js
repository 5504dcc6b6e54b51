/* Sort and filter forms fold behind one button on a phone (app.css always shows them on a
   desktop, where the button is not shown): the button opens and closes the form it controls. */
(function () {
  "use strict";

  document.querySelectorAll("button[data-filter-toggle]").forEach(function (toggle) {
    var form = document.getElementById(toggle.getAttribute("aria-controls"));
    toggle.addEventListener("click", function () {
      var open = toggle.getAttribute("aria-expanded") !== "true";
      toggle.setAttribute("aria-expanded", String(open));
      form.classList.toggle("open", open);
      var first = form.querySelector("select, input");
      if (open && first) first.focus();
    });
  });
})();

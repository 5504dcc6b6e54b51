/* The keyboard on a desktop, on the inbox and the thread page: j and k move the focus from card
   to card; the letters each card lists (a approve, r reject, e edit, s respond, i ignore,
   h history) and c (claim) and x (select, in the inbox) act on the card last focused or
   clicked, else on the first pending one; ? opens the list of keys the server drew (#keys,
   templates/approvals/_keys.html). A key presses the card's own button, so it does what a
   click does and nothing a click could not. Never while typing in a field, nor with Ctrl, Meta
   or Alt, nor behind the open list. */
(function () {
  "use strict";

  var KEYS = { a: "approve", r: "reject", e: "edit", s: "respond", i: "ignore", h: "history" };
  var list = document.getElementById("keys");
  // The card last focused or clicked, by its id: a card drawn again (static/js/cards.js swaps
  // in a fresh element) is still the one the reviewer was on.
  var currentId = null;

  function cardOf(element) {
    return element && element.closest ? element.closest(".card[data-id]") : null;
  }

  function byId(id) {
    return id ? document.getElementById("s-" + id) : null;
  }

  function remember(event) {
    var card = cardOf(event.target);
    if (card) currentId = card.dataset.id;
  }
  document.addEventListener("focusin", remember);
  document.addEventListener("click", remember, true);

  /* A field that takes text. A checkbox (a card's Select box, the version confirmation) takes
     no letters, so the keys still work from one. */
  function typing(target) {
    var field = target && target.closest ?
      target.closest("input, textarea, select, [contenteditable]:not([contenteditable=false])") : null;
    if (!field) return false;
    return !(field.tagName === "INPUT" && /^(checkbox|radio|button|submit|reset)$/.test(field.type));
  }

  /* The cards shown, in the page's order (the skeleton in its <template> is not among them). */
  function shown() {
    return Array.prototype.filter.call(document.querySelectorAll(".card[data-id]"), function (card) {
      return !card.closest("[hidden]");
    });
  }

  /* The focus to the next (step 1) or previous (-1) card after the one the reviewer is on: the
     card the focus is in, else the element that has it (a decided card's line), else the card
     last clicked. */
  function move(step) {
    var cards = shown();
    if (!cards.length) return;
    var active = document.activeElement;
    var anchor = cardOf(active) || (active && active !== document.body ? active : null) || byId(currentId);
    var target = null;
    if (!anchor || !document.contains(anchor)) target = step > 0 ? cards[0] : cards[cards.length - 1];
    else {
      var after = cards.filter(function (card) {
        return card !== anchor && !card.contains(anchor) &&
          Boolean(anchor.compareDocumentPosition(card) & Node.DOCUMENT_POSITION_FOLLOWING);
      });
      var before = cards.filter(function (card) {
        return card !== anchor && !card.contains(anchor) &&
          Boolean(anchor.compareDocumentPosition(card) & Node.DOCUMENT_POSITION_PRECEDING);
      });
      target = step > 0 ? after[0] : before[before.length - 1];
    }
    if (!target) return;
    target.focus({ preventScroll: true });
    var box = target.getBoundingClientRect();
    if (box.top < 0 || box.bottom > window.innerHeight) target.scrollIntoView({ block: "start" });
  }

  /* A button the reviewer could press now: not hidden, not off. */
  function usable(button) {
    return Boolean(button) && !button.hidden && !button.disabled && !button.closest("[hidden]");
  }

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey || event.repeat) return;
    if (typing(event.target) || (list && list.open)) return;  // Escape closes the list itself
    var key = event.key;
    if (key === "?") {
      if (!list) return;
      event.preventDefault();
      list.showModal();
      return;
    }
    if (key === "j" || key === "k") {
      event.preventDefault();
      move(key === "j" ? 1 : -1);
      return;
    }
    if (!KEYS[key] && key !== "c" && key !== "x") return;
    var card = byId(currentId);
    if (!card || card.dataset.status !== "pending") {
      card = document.querySelector(".card[data-id][data-status=pending]:not(.read-only)");
    }
    if (!card) return;
    currentId = card.dataset.id;
    if (key === "x") {
      // static/js/select.js, in the inbox; the box is there only for a card that may be chosen.
      var select = window.GatewaySelect;
      if (select && select.toggle(card)) event.preventDefault();
      return;
    }
    var button = key === "c" ? card.querySelector("button[data-presence=claim]") :
      card.querySelector("button[data-action=" + KEYS[key] + "]");
    if (!usable(button)) return;
    event.preventDefault();
    button.click();
    if (KEYS[key] === "history") button.focus();
  });
})();

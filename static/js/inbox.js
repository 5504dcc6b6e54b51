/* The inbox: pending suspensions, oldest first; new ones appear and decided ones change live. */
(function () {
  "use strict";

  var live = window.GatewayLive;
  var cards = window.GatewayCards;
  var filters = live.data.filters || {};
  var list = document.getElementById("cards");
  var empty = document.getElementById("empty");
  var counter = document.getElementById("pending-count");
  // Pending items beyond the rendered page still count in the title.
  var unseen = Number(counter.textContent) - list.querySelectorAll(".card[data-status=pending]").length;

  /* How many calls of one group the page shows: the agent goes on once all are decided. */
  function groupSizes() {
    var sizes = {};
    list.querySelectorAll(".card").forEach(function (c) {
      sizes[c.dataset.group] = (sizes[c.dataset.group] || 0) + 1;
    });
    list.querySelectorAll(".card").forEach(function (c) {
      var n = sizes[c.dataset.group];
      c.querySelector(".group-size").textContent = n > 1 ? " · " + n + " calls" : "";
    });
  }

  function recount() {
    groupSizes();
    var n = unseen + list.querySelectorAll(".card[data-status=pending]").length;
    counter.textContent = String(n);
    document.title = "(" + n + ") Inbox · Approval gateway";
    empty.hidden = list.children.length > 0;
  }

  function wanted(s) {
    return (!filters.agent || filters.agent === s.agent) &&
      (!filters.tool || filters.tool === s.tool) &&
      (!filters.kind || filters.kind === s.kind);
  }

  // The socket starts a little before the newest event the page includes (approvals.cursor), so
  // events up to `rendered` may come again. A card they raise and decide again was decided before
  // the page was drawn: it does not belong in the inbox. Later decisions change cards in place.
  var rendered = live.data.rendered || 0;

  live.on(function (message) {
    var card;
    if (message.type === "AGENT_SUSPENDED") {
      var s = message.payload;
      if (!s || cards.byId(s.id) || !wanted(s)) return;
      card = cards.build(s);
      if (message.id <= rendered) card.dataset.replayed = "true";
      list.appendChild(card);
    } else {
      cards.applyEvent(message);
      card = message.suspension && cards.byId(message.suspension);
      if (card && card.dataset.replayed && message.id <= rendered && card.dataset.status !== "pending") {
        card.remove();
      }
    }
    recount();
  });
  document.addEventListener("gateway:decided", recount);
  recount();
  live.start();
})();

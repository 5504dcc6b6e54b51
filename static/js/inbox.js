/* The inbox: pending suspensions, oldest first; new ones appear and decided ones change live. */
(function () {
  "use strict";

  var live = window.GatewayLive;
  var cards = window.GatewayCards;
  var filters = live.data.filters || {};
  var list = document.getElementById("cards");
  var empty = document.getElementById("empty");
  var counter = document.getElementById("pending-count");
  var replies = document.getElementById("replies");
  var replyTemplate = document.getElementById("reply-template");
  var fill = window.GatewayText.fill;
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
    var waiting = replies.querySelectorAll(".reply").length;
    var n = unseen + list.querySelectorAll(".card[data-status=pending]").length + waiting;
    counter.textContent = String(n);
    document.title = "(" + n + ") Inbox · Approval gateway";
    replies.hidden = waiting === 0;
    empty.hidden = list.children.length > 0 || waiting > 0;
  }

  /* Threads waiting for a reply: a card per thread, from INPUT_REQUIRED until it is answered,
     times out or ends. The text of the question is the agent's: filled as text, never HTML. */
  var REPLY_ENDS = ["INPUT_PROVIDED", "INPUT_TIMEOUT", "THREAD_CANCELLED", "THREAD_COMPLETED",
                    "THREAD_FAILED", "USER_MESSAGE"];

  function replyCard(threadId) {
    return document.getElementById("r-" + threadId);
  }

  function buildReply(message) {
    var p = message.payload || {};
    var card = replyTemplate.content.firstElementChild.cloneNode(true);
    card.id = "r-" + message.thread;
    card.dataset.thread = message.thread;
    fill(card.querySelector(".agent"), p.agent || "");
    fill(card.querySelector(".lineage"), p.frame || "");
    fill(card.querySelector(".question"), p.prompt || "");
    var deadline = card.querySelector(".reply-deadline");
    if (p.expires_at) {
      var when = deadline.querySelector("time");
      when.dateTime = p.expires_at;
      when.textContent = new Date(p.expires_at).toLocaleTimeString();
      deadline.hidden = false;
    }
    card.querySelector(".thread-link").href = "/threads/" + encodeURIComponent(message.thread) + "/";
    wireReply(card);
    return card;
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

  function wireReply(card) {
    var form = card.querySelector(".reply-form");
    if (!form) return;
    var said = card.querySelector(".notice");
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var field = form.querySelector("textarea");
      var button = form.querySelector("button");
      button.disabled = true;
      live.post("/api/threads/" + encodeURIComponent(card.dataset.thread) + "/messages",
                { text: field.value })
        .then(function (r) {
          button.disabled = false;
          if (r.status === 202) {
            card.remove();
            recount();
          } else {
            said.textContent = r.body.detail || "The server answered " + r.status + ".";
            said.hidden = false;
          }
        }, function () {
          button.disabled = false;
          said.textContent = "The server could not be reached. Try again.";
          said.hidden = false;
        });
    });
  }

  replies.querySelectorAll(".reply").forEach(wireReply);

  function followReplies(message) {
    if (!message.thread) return;
    if (message.type === "INPUT_REQUIRED") {
      var p = message.payload || {};
      if (filters.tool || (filters.kind && filters.kind !== "input")) return;
      if (filters.agent && filters.agent !== p.agent) return;
      if (!replyCard(message.thread)) replies.appendChild(buildReply(message));
    } else if (REPLY_ENDS.indexOf(message.type) !== -1) {
      var card = replyCard(message.thread);
      if (card) card.remove();
    }
  }

  live.on(function (message) {
    var card;
    followReplies(message);
    if (message.type === "AGENT_SUSPENDED") {
      var s = message.payload;
      if (!s || cards.byId(s.id) || !wanted(s)) return;
      card = cards.build(s, message.truncated);
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

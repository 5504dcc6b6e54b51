/* The inbox: pending suspensions in the reader's order (most urgent first by default); new ones
   take their place as they arrive, decided ones leave with a one-line notice saying who decided
   (a decision is final: the notice offers no undo), and the counts per agent and tool follow. */
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
  var order = live.data.order || "urgent";
  var created = live.data.created || {};  // suspension id -> when it was raised (ISO 8601)
  // null while too many wait to count them (approvals.inbox.COUNTED_LIMIT): no counts shown.
  var counts = live.data.counts;
  // A decided card's notice stays this long, and while it has the focus or the pointer.
  var NOTICE_MS = 30000;
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
      var size = c.querySelector(".group-size");
      if (size) size.textContent = n > 1 ? "One of " + n + " calls made together" : "";
      if (size) size.parentNode.hidden = n <= 1;
    });
  }

  function recount() {
    groupSizes();
    var waiting = replies.querySelectorAll(".reply").length;
    var n = unseen + list.querySelectorAll(".card[data-status=pending]").length + waiting;
    counter.textContent = String(n);
    document.title = "(" + n + ") Inbox · Approval gateway";
    replies.hidden = waiting === 0;
    empty.hidden = Boolean(list.querySelector(":scope > .card")) || waiting > 0;
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

  /* Where a card goes: approvals.inbox.INBOX_ORDERS, by its deadline (none: last) and age. */
  function sortKey(card) {
    var expires = card.dataset.expires ? Date.parse(card.dataset.expires) : NaN;
    return {
      expires: isNaN(expires) ? Infinity : expires,
      created: Date.parse(created[card.dataset.id] || "") || 0,
    };
  }

  function goesBefore(a, b) {
    if (order === "newest") return a.created > b.created;
    if (order === "urgent" && a.expires !== b.expires) return a.expires < b.expires;
    return a.created < b.created;
  }

  function place(card) {
    var key = sortKey(card);
    var next = null;
    var others = list.querySelectorAll(":scope > .card");
    for (var i = 0; i < others.length && next === null; i += 1) {
      if (goesBefore(key, sortKey(others[i]))) next = others[i];
    }
    list.insertBefore(card, next);
  }

  var lastFocused = null;  // the card the focus was last in
  list.addEventListener("focusin", function (event) {
    lastFocused = event.target.closest ? event.target.closest(".card") : null;
  });

  /* A decided card leaves the list; a line in its place says what it was and who decided. */
  function leave(card) {
    var gone = document.createElement("p");
    gone.className = "gone";
    gone.id = "gone-" + card.dataset.id;
    gone.setAttribute("role", "status");
    gone.tabIndex = -1;
    // What it was (the card's summary, else its tool) and by whom: cards.js and the server
    // wrote these as text nodes and control markers, copied as they are.
    function copy(from, to) {
      if (from) from.childNodes.forEach(function (node) { to.appendChild(node.cloneNode(true)); });
    }
    var what = document.createElement("span");
    what.className = "what";
    var summary = card.querySelector(".summary");
    if (summary && summary.textContent.trim()) copy(summary, what);
    else fill(what, card.dataset.tool || "");
    what.append(" · ");
    what.appendChild(document.createElement("span"));
    fill(what.lastChild, card.dataset.agent || "");
    var outcome = document.createElement("span");
    outcome.className = "outcome";
    copy(card.querySelector(".outcome"), outcome);
    var link = document.createElement("a");
    link.className = "thread-link";
    link.href = "/threads/" + encodeURIComponent(card.dataset.thread) + "/";
    link.textContent = "Open thread";
    gone.append(what, " ", outcome, " ", link);
    // The focus was in the card, or on its button that cards.js disabled while it sent.
    var lost = document.activeElement === null || document.activeElement === document.body;
    var focused = card.contains(document.activeElement) || (lost && lastFocused === card);
    list.replaceChild(gone, card);
    if (focused) gone.focus();
    function fade() {
      if (gone.matches(":hover") || gone.contains(document.activeElement)) {
        setTimeout(fade, NOTICE_MS / 3);
        return;
      }
      gone.remove();
      recount();
    }
    setTimeout(fade, NOTICE_MS);
  }

  /* The counts in the filters' options: every pending request, whatever the filters. */
  function showCounts() {
    if (!counts) return;
    [["agent", counts.agents], ["tool", counts.tools]].forEach(function (pair) {
      var select = document.querySelector("#filters select[name=" + pair[0] + "]");
      if (!select) return;
      Object.keys(pair[1]).forEach(function (name) {
        var option = Array.prototype.find.call(select.options, function (o) { return o.value === name; });
        if (!option) {
          option = document.createElement("option");
          option.value = name;
          select.appendChild(option);
        }
        option.dataset.count = String(pair[1][name]);
        option.textContent = name + " (" + pair[1][name] + ")";
      });
    });
  }

  function count(p, by) {
    if (!p || !counts) return;
    [[counts.agents, p.agent], [counts.tools, p.tool]].forEach(function (pair) {
      if (typeof pair[1] !== "string") return;
      pair[0][pair[1]] = Math.max(0, (pair[0][pair[1]] || 0) + by);
    });
    showCounts();
  }

  var ENDS = ["SUSPENSION_DECIDED", "SUSPENSION_TIMEOUT", "SUSPENSION_CANCELLED"];

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

  var applying = null;  // the event cards.js is applying, while it applies it

  live.on(function (message) {
    var card;
    followReplies(message);
    var fresh = message.id > rendered;  // the counts the page was drawn with include the others
    if (message.type === "AGENT_SUSPENDED") {
      var s = message.payload;
      if (fresh) count(s, 1);
      if (!s || cards.byId(s.id) || !wanted(s)) return;
      card = cards.build(s, message.truncated);
      if (!fresh) card.dataset.replayed = "true";
      created[s.id] = s.created_at || message.created_at;
      place(card);
    } else {
      if (fresh && ENDS.indexOf(message.type) !== -1) count(message.payload, -1);
      applying = message;
      try {
        cards.applyEvent(message);
      } finally {
        applying = null;
      }
    }
    recount();
  });
  document.addEventListener("gateway:decided", function (event) {
    var card = event.target;
    if (card.parentNode === list) {
      // Raised and decided before the page was drawn: it never belonged in this inbox.
      if (card.dataset.replayed && applying && applying.id <= rendered) card.remove();
      else leave(card);
    }
    recount();
  });
  // Dismissed without a decision (cards.js, agents.decisions.ignore): off the inbox, with the
  // same one-line notice; it stays pending on its thread's page until its deadline.
  document.addEventListener("gateway:ignored", function (event) {
    if (event.target.parentNode === list) leave(event.target);
    recount();
  });
  showCounts();
  recount();
  live.start();
})();

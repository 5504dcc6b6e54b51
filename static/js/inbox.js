/* The inbox: pending suspensions in the reader's order (most urgent first by default). Every card,
   reply card, count and "decided" line is rendered by the server: when an event concerns one,
   the page asks for it again (/fragments/...) and puts it in its place; new cards take their
   place by their deadline and age, decided ones leave the server's one-line notice saying who
   decided (a decision is final: the notice offers no undo). */
(function () {
  "use strict";

  var live = window.GatewayLive;
  var cards = window.GatewayCards;
  var swap = window.GatewaySwap;
  var filters = live.data.filters || {};
  var list = document.getElementById("cards");
  var empty = document.getElementById("empty");
  var replies = document.getElementById("replies");
  var order = live.data.order || "urgent";
  var together = live.data.together !== false;
  // A decided card's notice stays this long, and while it has the focus or the pointer.
  var NOTICE_MS = 30000;
  var query = Object.keys(filters).map(function (k) {
    return encodeURIComponent(k) + "=" + encodeURIComponent(filters[k]);
  }).join("&");

  function shown() {
    var waiting = replies.querySelectorAll(".reply").length;
    replies.hidden = waiting === 0;
    empty.hidden = Boolean(list.querySelector(":scope > .card")) || waiting > 0;
  }

  /* The counts (how many wait, per agent and tool) as the server has them now, swapped in by
     id; asked for once for a burst of events. A select the reader is using is left alone. */
  var countsTimer = null;

  function recount() {
    shown();
    if (countsTimer !== null) return;
    countsTimer = setTimeout(function () {
      countsTimer = null;
      swap.get("/fragments/inbox/counts" + (query ? "?" + query : "")).then(function (html) {
        if (html === null) return;
        swap.byIds(html);
        document.title = "(" + document.getElementById("pending-count").textContent + ") Inbox · Approval gateway";
      }, function () { /* the next event asks again */ });
    }, 100);
  }

  /* Where a card goes: approvals.inbox.INBOX_ORDERS, by its deadline (none: last) and age. */
  function sortKey(card) {
    var expires = card.dataset.expires ? Date.parse(card.dataset.expires) : NaN;
    return {
      expires: isNaN(expires) ? Infinity : expires,
      created: Date.parse(card.dataset.created || "") || 0,
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

  /* The other cards of a group say how many of its calls wait: asked for again. */
  function siblings(group, except) {
    list.querySelectorAll(":scope > .card").forEach(function (c) {
      if (c.dataset.group === group && c.dataset.id !== except) cards.refresh(c.dataset.id);
    });
  }

  // A card asked for that is not on the page: in the inbox while it is pending (a replayed
  // event may name one decided before the page was drawn: the server answers with its line).
  /* Triage rows (approvals/triage.py): a card may stand for identical requests, named by its
     data-triage key, their ids in data-members. */
  function rowOf(key) {
    var found = null;
    list.querySelectorAll(":scope > .card[data-triage]").forEach(function (c) {
      if (c.dataset.triage === key) found = c;
    });
    return found;
  }

  function rowHolding(id) {
    var found = null;
    list.querySelectorAll(":scope > .card[data-members]").forEach(function (c) {
      if (c.dataset.members.split(" ").indexOf(id) !== -1) found = c;
    });
    return found;
  }

  /* A row left the inbox: the next identical request that waits, if any, takes its place. */
  function nextOf(id) {
    var url = "/fragments/suspensions/" + encodeURIComponent(id) + "/card?in=inbox&next=1&" +
      query + "&group=" + (together ? "same" : "none");
    swap.get(url).then(function (html) {
      var fresh = html ? swap.parse(html).firstElementChild : null;
      if (!fresh || cards.byId(fresh.dataset.id)) return;
      arrived(fresh);
      // Drawn as it was when the server rendered it: an event that decided it meanwhile came
      // while it was not on the page (a group decided at once), so it is asked for again.
      if (fresh.isConnected) cards.refresh(fresh.dataset.id);
    }, function () { /* the counts still say how many wait */ });
  }

  function arrived(card) {
    if (!card.classList.contains("card") || card.dataset.status !== "pending" || card.isConnected) return;
    if (document.getElementById("gone-" + card.dataset.id)) return;
    // Two identical requests came at once: one row stands for both, asked for again.
    var row = card.dataset.triage && rowOf(card.dataset.triage);
    if (row) {
      cards.refresh(row.dataset.id);
      return;
    }
    place(card);
    cards.started(card);
    siblings(card.dataset.group, card.dataset.id);
    shown();
  }
  cards.onArrival(arrived);

  var lastFocused = null;  // the card the focus was last in
  list.addEventListener("focusin", function (event) {
    lastFocused = event.target.closest ? event.target.closest(".card") : null;
  });

  /* A card off the inbox (decided, or dismissed): the server's line takes its place. */
  document.addEventListener("gateway:left", function (event) {
    var card = event.target;
    var gone = event.detail;
    if (card.parentNode !== list) return;
    // The focus was in the card, or on its button that was disabled while it sent.
    var lost = document.activeElement === null || document.activeElement === document.body;
    var focused = card.contains(document.activeElement) || (lost && lastFocused === card);
    list.replaceChild(gone, card);
    if (focused) gone.focus();
    siblings(card.dataset.group, card.dataset.id);
    recount();
    // It may have stood for requests that came since it was drawn (a row is asked for again
    // when one of its own arrives, and may then be off the inbox already).
    if (together && card.dataset.triage && card.dataset.triage.indexOf("id/") !== 0) nextOf(card.dataset.id);
    function fade() {
      if (gone.matches(":hover") || gone.contains(document.activeElement)) {
        setTimeout(fade, NOTICE_MS / 3);
        return;
      }
      gone.remove();
      shown();
    }
    setTimeout(fade, NOTICE_MS);
  });

  /* Threads waiting for a reply: a card per thread, from INPUT_REQUIRED until it is answered,
     times out or ends, as the server renders it (empty once it waits no more). */
  var REPLY_EVENTS = ["INPUT_REQUIRED", "INPUT_PROVIDED", "INPUT_TIMEOUT", "THREAD_CANCELLED",
                      "THREAD_COMPLETED", "THREAD_FAILED", "USER_MESSAGE"];
  var replyLoading = {};

  function refreshReply(thread) {
    if (replyLoading[thread]) {
      replyLoading[thread].again = true;
      return;
    }
    var busy = replyLoading[thread] = { again: false };
    var url = "/fragments/threads/" + encodeURIComponent(thread) + "/reply" + (query ? "?" + query : "");
    swap.get(url).then(function (html) {
      if (html === null) return;
      var fresh = swap.parse(html).firstElementChild;
      var old = document.getElementById("r-" + thread);
      if (fresh && old) {
        if (!old.contains(document.activeElement)) old.replaceWith(fresh);
      } else if (fresh) replies.appendChild(fresh);
      else if (old) old.remove();
      shown();
    }, function () { /* the next event asks again */ }).then(function () {
      delete replyLoading[thread];
      if (busy.again) refreshReply(thread);
    });
  }

  replies.addEventListener("submit", function (event) {
    var form = event.target.closest(".reply-form");
    if (!form) return;
    event.preventDefault();
    var card = form.closest(".reply");
    var said = card.querySelector(".notice");
    var field = form.querySelector("textarea");
    var button = form.querySelector("button");
    button.disabled = true;
    live.post("/api/threads/" + encodeURIComponent(card.dataset.thread) + "/messages", { text: field.value })
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

  /* Does a request that just came fit the reader's filters (approvals.triage.pending_rows)?
     A new request is claimed by nobody yet. */
  function wanted(s) {
    var risk = (s.presentation && s.presentation.risk) || "normal";
    var due = s.expires_at ? Date.parse(s.expires_at) : NaN;
    return (!filters.agent || filters.agent === s.agent) &&
      (!filters.tool || filters.tool === s.tool) &&
      (!filters.kind || filters.kind === s.kind) &&
      (!filters.risk || filters.risk === risk) &&
      (!filters.within || (!isNaN(due) && due <= Date.now() + Number(filters.within) * 1000)) &&
      (!filters.claim || filters.claim === "unclaimed");
  }

  var COUNTED = ["AGENT_SUSPENDED", "SUSPENSION_DECIDED", "SUSPENSION_TIMEOUT", "SUSPENSION_CANCELLED",
                 "SUSPENSION_IGNORED"];

  live.on(function (message) {
    if (message.thread && REPLY_EVENTS.indexOf(message.type) !== -1) {
      refreshReply(message.thread);
      recount();
    }
    if (COUNTED.indexOf(message.type) !== -1) recount();
    var s = message.payload;
    // A card on the page is asked for again by static/js/cards.js; a new one is asked for here,
    // or the row of its identical requests, which counts it.
    if (message.type === "AGENT_SUSPENDED" && s && s.id && !cards.byId(s.id) && wanted(s)) {
      var row = together && s.args_hash ? rowOf(s.agent + "/" + s.tool + "/" + s.args_hash) : null;
      cards.refresh(row ? row.dataset.id : s.id);
    } else if (message.suspension && !cards.byId(message.suspension)) {
      // One of the requests a row stands for, decided (or changed) elsewhere: the row's count.
      var holder = rowHolding(message.suspension);
      if (holder) cards.refresh(holder.dataset.id);
    }
  });
  // A claim taken or given up changes the "Claim" filter's counts (claims are not events).
  var presenceTimer = null;
  live.onPresence(function () {
    if (presenceTimer !== null) return;
    presenceTimer = setTimeout(function () {
      presenceTimer = null;
      recount();
    }, 2000);
  });
  shown();
  live.start();
})();

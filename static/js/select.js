/* Select many, in the inbox: a reviewer ticks cards (their Select boxes, templates/approvals/
   _card.html) and approves or rejects them all with one action. The decisions go to POST
   /api/decisions, at most 100 a call; the server decides each as if it came alone, so one it
   refuses (four eyes, a changed agent) stays pending, stays selected and says why on its card,
   in the server's words. The bar is the server's (templates/approvals/inbox.html): this file
   fills in its count and what happened, and asks for each card again afterwards. */
(function () {
  "use strict";

  var live = window.GatewayLive;
  var cards = window.GatewayCards;
  var fill = window.GatewayText.fill;
  var bar = document.getElementById("selection");
  if (!bar) return;  // a reader who may not decide has no bar and no boxes
  var list = document.getElementById("cards");
  var countLine = document.getElementById("selection-count");
  var said = document.getElementById("selection-said");
  var rejectBox = document.getElementById("selection-reject");
  var reason = rejectBox.querySelector("input");
  var CHUNK = 100;  // approvals.api.bodies.MAX_DECISIONS

  // card id -> the ids its selection still covers: its own, or, for a group row, all the
  // identical requests it stands for (data-members). An id leaves once it is decided.
  var selected = {};
  var running = false;
  // refused id -> {text, ids}: refusals of a group row that left, for the row that comes next.
  var carried = {};
  // card id -> the refusal its card shows, shown again when the card is drawn again.
  var notes = {};

  function members(card) {
    return card.dataset.members ? card.dataset.members.split(" ") : [card.dataset.id];
  }

  function boxOf(card) {
    return card.querySelector("input[data-action=select]");
  }

  function count() {
    return Object.keys(selected).reduce(function (n, id) { return n + selected[id].length; }, 0);
  }

  function say(text) {
    fill(said, text);
  }

  function button(name) {
    return bar.querySelector("[data-select=" + name + "]");
  }

  /* The bar and the boxes as the selection is: run after every change, and after a card is
     drawn again (the fresh one comes unticked). */
  function show() {
    var n = count();
    // Hidden while nothing is selected, unless it still says what the last action did.
    bar.hidden = n === 0 && !said.textContent;
    bar.setAttribute("aria-busy", String(running));
    fill(countLine, n + " selected");
    ["approve", "reject", "confirm-reject"].forEach(function (name) {
      button(name).disabled = running || n === 0;
    });
    button("clear").disabled = running;
    if (n === 0) closeReject();
    list.querySelectorAll(":scope > .card[data-id]").forEach(function (card) {
      var on = Boolean(selected[card.dataset.id]);
      var box = boxOf(card);
      if (box) box.checked = on;
      card.classList.toggle("selected", on);
    });
  }

  /* Select `card`, or leave it out (`on` undefined: the other of what it is). True when the
     card can be selected at all (it has a box). */
  function toggle(card, on) {
    if (!card || !boxOf(card)) return false;
    if (running) {
      show();  // the box goes back to what is being sent
      return true;
    }
    var id = card.dataset.id;
    if (on === undefined) on = !selected[id];
    if (on) selected[id] = members(card);
    else delete selected[id];
    say("");
    show();
    return true;
  }

  function closeReject() {
    rejectBox.hidden = true;
    button("reject").setAttribute("aria-expanded", "false");
  }

  /* One item's decision: `body` with what its card showed, as a single decision binds it
     (static/js/cards.js send). A group row's members are identical requests: the row's card
     speaks for those not shown. */
  function decisionFor(id, card, body) {
    var shownAs = cards.byId(id) || card;
    var decision = Object.assign({}, body);
    var seen = {};
    if (shownAs.dataset.argsHash) seen.args_hash = shownAs.dataset.argsHash;
    if (shownAs.dataset.agentVersion) seen.agent_version = Number(shownAs.dataset.agentVersion);
    decision.seen = seen;
    var confirm = shownAs.querySelector("input[name=confirm-version]");
    if (confirm && confirm.checked) decision.confirmVersionChange = true;
    return decision;
  }

  /* What the card says of a refusal: as static/js/cards.js says it of a single decision. */
  function refusal(answer) {
    if (answer.status === 409 && answer.error === "version_changed") {
      return "Not approved yet: " + (answer.detail || "the agent changed.");
    }
    if (answer.status === 409 && answer.error !== "stale_view") {
      return "Too late: " + (answer.detail || "someone decided first.");
    }
    return answer.detail || "The server answered " + answer.status + ".";
  }

  function plural(n, one, many) {
    return n + " " + (n === 1 ? one : many);
  }

  /* Send `body` (an approval, or a rejection with its reason) for every selected id, in the
     page's order, 100 a call. An id whose answer came back is not sent again: after a failed
     call the ids not answered stay selected, to be sent by the next press. */
  function decide(body) {
    if (running) return;
    var work = [];  // [suspension id, the id of the card that selected it]
    var size = {};  // card id -> how many ids it covered when sent
    list.querySelectorAll(":scope > .card[data-id]").forEach(function (card) {
      var ids = selected[card.dataset.id];
      if (!ids) return;
      size[card.dataset.id] = ids.length;
      ids.forEach(function (id) { work.push([id, card.dataset.id]); });
    });
    if (!work.length) return;
    var items = work.map(function (w) {
      return { suspension: w[0], decision: decisionFor(w[0], cards.byId(w[1]), body) };
    });
    var answers = {};
    var failure = "";
    running = true;
    show();

    function from(start) {
      if (start >= items.length) return Promise.resolve();
      var chunk = items.slice(start, start + CHUNK);
      say("Deciding " + (start + chunk.length) + " of " + items.length + "…");
      return live.post("/api/decisions", { decisions: chunk }).then(function (r) {
        if (r.status !== 200 || !r.body.results) {
          failure = (r.body && r.body.detail) || "The server answered " + r.status + ".";
          return;
        }
        r.body.results.forEach(function (answer) { answers[answer.id] = answer; });
        return from(start + chunk.length);
      }, function () {
        failure = "The server could not be reached.";
      });
    }

    from(0).then(function () {
      var decided = 0;
      var unsent = 0;
      var refused = {};  // card id -> the refused answers of its ids
      work.forEach(function (w) {
        var answer = answers[w[0]];
        if (!answer) unsent += 1;
        else if (answer.status === 200 || answer.status === 202) {
          decided += 1;
          if (selected[w[1]]) selected[w[1]] = selected[w[1]].filter(function (id) { return id !== w[0]; });
          if (selected[w[1]] && !selected[w[1]].length) delete selected[w[1]];
        } else (refused[w[1]] = refused[w[1]] || []).push(answer);
      });
      var refusedCount = Object.keys(refused).reduce(function (n, id) { return n + refused[id].length; }, 0);
      // Each card as the server has it now (a decided one leaves, static/js/inbox.js); then a
      // refusal on its card, which the fresh card would otherwise not show.
      return Promise.all(Object.keys(size).map(function (id) {
        return cards.refresh(id).then(function () {
          var mine = refused[id];
          if (!mine) return;
          var text = refusal(mine[0]);
          if (size[id] > 1) text = mine.length + " of " + size[id] + " refused: " + text;
          if (cards.byId(id)) {
            notes[id] = text;
            cards.notice(cards.byId(id), text);
            return;
          }
          // A group row that left (its own request was decided): the next of its requests
          // takes its place (static/js/inbox.js), and the refused ones stay selected on it.
          var ids = mine.map(function (a) { return a.id; });
          ids.forEach(function (refusedId) { carried[refusedId] = { text: text, ids: ids }; });
        });
      })).then(function () {
        var parts = [];
        if (decided || !refusedCount) parts.push(decided + " decided");
        if (refusedCount) {
          parts.push(refusedCount + " refused: see the " + (Object.keys(refused).length === 1 ? "card" : "cards"));
        }
        var text = parts.join(", ");
        if (failure) {
          text = failure + " " + text + "; " + plural(unsent, "was", "were") +
            " not answered and " + (unsent === 1 ? "stays" : "stay") + " selected: try again.";
        }
        // The row that came in place of a group row that left may be drawn already, before
        // its refusals were carried: it takes them over now (else when it is drawn).
        takeOver();
        running = false;
        if (!failure && !refusedCount && body.approved === false) reason.value = "";
        say(text);
        show();
      });
    });
  }

  list.addEventListener("change", function (event) {
    var box = event.target.closest("input[data-action=select]");
    if (box) toggle(box.closest(".card"), box.checked);
  });

  /* A row that comes in place of one that left takes over its refused requests: they stay
     selected on it, and its card says why they were refused. */
  function takeOver() {
    list.querySelectorAll(":scope > .card[data-id]").forEach(function (card) {
      var note = null;
      var ids = members(card).filter(function (id) { return carried[id]; });
      if (!ids.length) return;
      note = carried[ids[0]];
      ids.forEach(function (id) { delete carried[id]; });
      selected[card.dataset.id] = (selected[card.dataset.id] || []).concat(ids.filter(function (id) {
        return (selected[card.dataset.id] || []).indexOf(id) === -1;
      }));
      notes[card.dataset.id] = note.text;
    });
    list.querySelectorAll(":scope > .card[data-id]").forEach(function (card) {
      var text = notes[card.dataset.id];
      var p = card.querySelector(".notice");
      if (text && p && p.hidden) cards.notice(card, text);
    });
  }

  /* A card drawn again comes unticked: ticked again here if it is selected. */
  new MutationObserver(function () {
    takeOver();
    show();
  }).observe(list, { childList: true });

  /* A card that leaves the inbox (decided elsewhere, dismissed) leaves the selection. */
  document.addEventListener("gateway:left", function (event) {
    delete notes[event.target.dataset.id];
    if (!selected[event.target.dataset.id]) return;
    delete selected[event.target.dataset.id];
    show();
  });

  document.addEventListener("click", function (event) {
    var pressed = event.target.closest("button[data-select]");
    if (!pressed) return;
    var what = pressed.dataset.select;
    if (what === "all") {
      // Every card shown that this reader may decide (a read-only one can still be ticked).
      list.querySelectorAll(":scope > .card[data-id]:not(.read-only)").forEach(function (card) {
        if (boxOf(card) && !selected[card.dataset.id]) toggle(card, true);
      });
    } else if (what === "clear") {
      selected = {};
      notes = {};
      say("");
      reason.value = "";
      show();
    } else if (what === "approve") {
      closeReject();
      decide({ approved: true });
    } else if (what === "reject") {
      rejectBox.hidden = !rejectBox.hidden;
      pressed.setAttribute("aria-expanded", String(!rejectBox.hidden));
      if (!rejectBox.hidden) reason.focus();
    } else if (what === "confirm-reject") {
      decide({ approved: false, reason: reason.value.trim() });
    }
  });

  reason.addEventListener("keydown", function (event) {
    if (event.key !== "Enter") return;
    event.preventDefault();
    decide({ approved: false, reason: reason.value.trim() });
  });

  window.GatewaySelect = { toggle: toggle };
  show();
})();

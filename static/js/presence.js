/* Claim and presence on the suspension cards (presence/session.py has the socket messages).
   The page tells the server which pending cards are on screen ("view"), and the server sends a
   PRESENCE message per card: who has claimed it and who else is looking at it now. A claim
   informs, it does not lock: everyone who may decide still can. Names are other people's
   text: filled as text (static/js/text.js), never markup. */
(function () {
  "use strict";

  var live = window.GatewayLive;
  var fill = window.GatewayText.fill;
  var VIEW_LIMIT = 50;  // presence/actions.py VIEW_LIMIT
  var onScreen = {};  // card id -> true while any of it is in the viewport
  var said = {};  // card id -> the last PRESENCE message for it
  var lastSent = null;
  var timer = null;

  function pendingCards() {
    return Array.prototype.slice.call(document.querySelectorAll(".card[data-id][data-status=pending]"));
  }

  /* Someone who may decide this card sees its decision buttons (the server checks again). */
  function mayDecide(card) {
    var button = card.querySelector("[data-action=approve], [data-action=answer]");
    return Boolean(button) && !card.classList.contains("read-only");
  }

  /* The card's presence part: the server draws it once, on the card skeleton
     (templates/approvals/_card.html), copied into a card the first time it is needed (a page of
     a hundred cards stays small, issue 31); filled here as text. */
  var skeleton = document.querySelector("#card-template");
  function bar(card) {
    var found = card.querySelector(".presence");
    if (found || !skeleton) return found;
    var part = skeleton.content.querySelector(".presence").cloneNode(true);
    var head = card.querySelector(".card-head");
    card.insertBefore(part, head ? head.nextSibling : card.firstChild);
    return part;
  }

  /* "Sam O'Neil" -> "SO": the first letter or digit of the first two words that have one. */
  function initials(name) {
    var letters = String(name).split(/\s+/).map(function (word) {
      var found = word.match(/[\p{L}\p{N}]/u);
      return found ? found[0] : "";
    }).filter(Boolean);
    return letters.slice(0, 2).join("").toUpperCase() || "?";
  }

  function age(iso) {
    var seconds = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    if (!isFinite(seconds) || seconds < 60) return "just now";
    var minutes = Math.floor(seconds / 60);
    return minutes + " min ago";
  }

  function show(card) {
    var m = said[card.dataset.id];
    var div = bar(card);
    if (!div) return;
    var pending = card.dataset.status === "pending";
    div.hidden = !pending;
    if (!pending) return;
    var claim = m && m.claim;
    var line = div.querySelector(".claim-line");
    line.hidden = !claim;
    card.classList.toggle("claimed", Boolean(claim));
    card.classList.toggle("claimed-by-me", Boolean(claim && claim.mine));
    if (claim) {
      fill(line.querySelector(".claimer"), claim.mine ? "You" : claim.user);
      line.querySelector(".claim-what").textContent = claim.mine ? "are reviewing" : "is reviewing";
      line.querySelector(".claim-age").textContent = "(claimed " + age(claim.claimed_at) + ")";
      line.title = "Until " + new Date(claim.expires_at).toLocaleTimeString() + " unless released";
    }
    card.dataset.presenceMay = String(mayDecide(card));
    var button = div.querySelector(".claim-button");
    var mine = Boolean(claim && claim.mine);
    button.hidden = !mayDecide(card) || (claim && !mine) || !m;
    button.dataset.presence = mine ? "release" : "claim";
    button.textContent = mine ? "Release" : "Claim";
    button.title = mine ? "Let the others know you stopped reviewing it" : "Let the others know you are reviewing it";
    var viewers = (m && m.viewers) || [];
    var box = div.querySelector(".viewers");
    box.hidden = viewers.length === 0;
    var faces = box.querySelector(".faces");
    faces.replaceChildren.apply(faces, viewers.map(function (v) {
      var face = document.createElement("abbr");
      face.className = "face";
      face.title = v.user;
      fill(face, initials(v.user));
      return face;
    }));
    var names = viewers.map(function (v) { return v.user; }).join(", ");
    if (m && m.more) names += " and " + m.more + " more";
    fill(box.querySelector(".names"), names);
  }

  /* The pending cards on screen, sent when they change (and again on each new socket). */
  function sendViews() {
    timer = null;
    var ids = pendingCards().filter(function (c) { return onScreen[c.dataset.id]; })
      .map(function (c) { return c.dataset.id; }).slice(0, VIEW_LIMIT);
    var key = ids.join(",");
    if (key === lastSent) return;
    if (live.send({ type: "view", suspensions: ids })) lastSent = key;
  }

  function soon() {
    if (timer === null) timer = setTimeout(sendViews, 150);
  }

  var seen = typeof IntersectionObserver === "function" ? new IntersectionObserver(function (entries) {
    entries.forEach(function (e) { onScreen[e.target.dataset.id] = e.isIntersecting; });
    soon();
  }) : null;

  function track() {
    pendingCards().forEach(function (card) {
      if (card.dataset.presenceTracked) return;
      card.dataset.presenceTracked = "true";
      show(card);
      if (seen) seen.observe(card);
      else onScreen[card.dataset.id] = true;
    });
    document.querySelectorAll(".card[data-presence-tracked]").forEach(function (card) {
      if (card.dataset.status !== "pending") {
        var part = bar(card);
        if (part) part.hidden = true;
        if (seen) seen.unobserve(card);
        delete onScreen[card.dataset.id];
      } else if (String(mayDecide(card)) !== card.dataset.presenceMay) {
        show(card);  // the card turned read-only (static/js/cards.js), or back: the button follows
      }
    });
    soon();
  }

  new MutationObserver(track).observe(document.body, {
    childList: true, subtree: true, attributes: true, attributeFilter: ["data-status", "class"],
  });

  live.onPresence(function (m) {
    var card = m.suspension && document.getElementById("s-" + m.suspension);
    if (m.type === "CLAIM_REFUSED") {
      if (!card) return;
      var notice = card.querySelector(".notice");
      fill(notice, m.detail || "The claim was refused.");
      notice.hidden = false;
      return;
    }
    said[m.suspension] = m;
    // The bar moves the card's buttons: not while one is pressed (static/js/swap.js).
    if (card) window.GatewaySwap.whenReleased(card, function () { if (card.isConnected) show(card); });
  });

  live.onOpen(function () {
    lastSent = null;  // a new socket knows nothing of this page yet
    soon();
  });

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-presence]");
    if (!button) return;
    var card = button.closest(".card");
    if (!card || card.dataset.status !== "pending") return;
    var notice = card.querySelector(".notice");
    if (!live.send({ type: button.dataset.presence, suspension: card.dataset.id })) {
      fill(notice, "Not connected: try again once the page says Live.");
      notice.hidden = false;
      return;
    }
    notice.hidden = true;
  });

  setInterval(function () { pendingCards().forEach(function (card) { if (said[card.dataset.id]) show(card); }); }, 15000);
  track();
})();

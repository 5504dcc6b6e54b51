/* Suspension cards. The server renders them (templates/approvals/_card.html); this file asks it
   for a card again when an event concerns it (GET /fragments/suspensions/<id>/card) and swaps the
   fresh one in, keeping what the reviewer has open or typed. Decisions go through the JSON API;
   after each the card is asked for again, and the server's refusals are shown as it words them. */
(function () {
  "use strict";

  var live = window.GatewayLive;
  var fill = window.GatewayText.fill;
  var template = document.getElementById("card-template");
  var inInbox = document.body.classList.contains("inbox-page");

  /* The inbox's filters and rows, for the card as the inbox shows it (approvals/triage.py). */
  function inboxQuery() {
    var filters = live.data.filters || {};
    var query = Object.keys(filters).map(function (k) {
      return "&" + encodeURIComponent(k) + "=" + encodeURIComponent(filters[k]);
    }).join("");
    return query + "&group=" + (live.data.together === false ? "none" : "same");
  }

  function byId(id) {
    return document.getElementById("s-" + id);
  }

  /* Fetch and swap -------------------------------------------------------------------- */

  var parse = window.GatewaySwap.parse;
  var get = window.GatewaySwap.get;

  /* The card of suspension `id` as the server renders it now (in the inbox: its line once it
     has left the inbox, p.gone); null if it cannot be had. */
  function load(id) {
    var url = "/fragments/suspensions/" + encodeURIComponent(id) + "/card" + (inInbox ? "?in=inbox" + inboxQuery() : "");
    return get(url).then(function (html) {
      return html === null ? null : parse(html).firstElementChild;
    }, function () { return null; });
  }

  // The parts a reviewer opens and types in: carried from the old card into the fresh one
  // while it stays pending. [part, where a lazy one goes, before it or inside].
  var CARRIED = [
    [".reject-box"],
    [".grant-box", ".decide-part .buttons", "after"],
    [".edit-box", ".only-confirmation .shortcuts", "before"],
    [".respond-box", ".only-confirmation .shortcuts", "before"],
    [".extend-box", ".extend-part", "inside"],
    [".history"],
  ];
  var TOGGLES = {
    ".reject-box": "reject", ".grant-box": "grant", ".edit-box": "edit", ".respond-box": "respond",
    ".extend-box": "extend", ".history": "history",
  };

  function carry(old, fresh) {
    var focused = old.contains(document.activeElement) ? document.activeElement : null;
    CARRIED.forEach(function (part) {
      var mine = old.querySelector(part[0]);
      // A lazy box exists once the reviewer opened it (it may be loading its form): kept
      // whole; a part every card has, while it is open.
      if (!mine || (mine.hidden && !part[1])) return;
      var theirs = fresh.querySelector(part[0]);
      if (theirs) theirs.replaceWith(mine);
      else if (part[1] && fresh.querySelector(part[1])) {
        var anchor = fresh.querySelector(part[1]);
        if (part[2] === "before") anchor.before(mine);
        else if (part[2] === "after") anchor.after(mine);
        else anchor.appendChild(mine);
      } else return;
      var toggle = fresh.querySelector("[data-action=" + TOGGLES[part[0]] + "]");
      if (toggle) toggle.setAttribute("aria-expanded", String(!mine.hidden));
    });
    old.querySelectorAll("textarea[name=response]").forEach(function (field) {
      var twin = fresh.querySelector("textarea[name=response]");
      if (twin) twin.value = field.value;
    });
    var confirm = old.querySelector("input[name=confirm-version]");
    var again = fresh.querySelector("input[name=confirm-version]");
    if (confirm && again) again.checked = confirm.checked;
    return focused;
  }

  /* Put the fresh card where the old one is (unless it shows nothing new: a replayed event). */
  function swap(old, fresh) {
    if (fresh.dataset.fingerprint && fresh.dataset.fingerprint === old.dataset.fingerprint &&
        fresh.classList.contains("card")) return;
    var was = old.dataset.status;
    var ignoredBefore = old.classList.contains("ignored");
    var focused = null;
    if (fresh.classList.contains("card") && fresh.dataset.status === "pending") focused = carry(old, fresh);
    var action = document.activeElement && old.contains(document.activeElement) &&
      document.activeElement.dataset ? document.activeElement.dataset.action : null;
    // A card moved to with j or k (static/js/keys.js) keeps the focus when it is drawn again.
    var whole = document.activeElement === old;
    if (fresh.classList.contains("gone")) {
      // Off the inbox: the inbox puts the line in its place (static/js/inbox.js).
      old.dispatchEvent(new CustomEvent("gateway:left", { bubbles: true, detail: fresh }));
      return;
    }
    old.replaceWith(fresh);
    if (whole) fresh.focus({ preventScroll: true });
    else if (focused && fresh.contains(focused)) focused.focus();
    else if (action) {
      var same = fresh.querySelector("[data-action=" + action + "]");
      if (same && !same.disabled && !same.closest("[hidden]")) same.focus();
    }
    showDeadline(fresh);
    tick(fresh);
    edits().guard(fresh);
    if (was === "pending" && fresh.dataset.status !== "pending") {
      fresh.dispatchEvent(new CustomEvent("gateway:decided", { bubbles: true }));
    } else if (!ignoredBefore && fresh.classList.contains("ignored")) {
      fresh.dispatchEvent(new CustomEvent("gateway:ignored", { bubbles: true }));
    }
  }

  var loading = {};  // suspension id -> {done: Promise, again: bool} while a card is asked for
  var failed = {};   // suspension id -> how many times in a row its card could not be had
  var arrivals = [];  // called with a card that is not on the page yet

  /* Ask for suspension `id`'s card and swap it in; a request made while one is on its way
     asks once more after it, so a burst of events costs at most two requests. */
  function refresh(id) {
    var busy = loading[id];
    if (busy) {
      busy.again = true;
      return busy.done;
    }
    busy = loading[id] = { again: false };
    busy.done = load(id).then(function (fresh) {
      var old = byId(id);
      if (fresh && old) {
        window.GatewaySwap.whenReleased(old, function () {
          // Held through a click that sent a decision: that request draws the card when it is back.
          if (old.isConnected && old.getAttribute("aria-busy") !== "true") swap(old, fresh);
        });
      }
      else if (fresh) arrivals.forEach(function (handler) { handler(fresh); });
      // Not had (the network, the server): asked for again a little later, so no event's
      // change is lost; a few times, then the next event asks.
      var tries = (failed[id] || 0) + 1;
      if (fresh) delete failed[id];
      else if (tries <= 5) {
        failed[id] = tries;
        setTimeout(function () { refresh(id); }, 500 * Math.pow(2, tries));
      } else delete failed[id];
    }).then(function () {
      delete loading[id];
      if (busy.again) return refresh(id);
    });
    return busy.done;
  }

  /* Any event about a suspension on the page: its card is asked for again. */
  live.on(function (message) {
    var id = message.suspension || (message.type === "AGENT_SUSPENDED" && message.payload && message.payload.id);
    if (id && byId(id)) refresh(id);
  });

  /* Sending --------------------------------------------------------------------------- */

  function notice(card, text) {
    var p = card && card.querySelector(".notice");
    if (!p) return;
    fill(p, text);
    p.hidden = !text;
  }

  /* The server's words for what it refused, each beside the field it names. */
  function fieldErrors(card, list, errors) {
    edits().showErrors(card, list || card.querySelector(".field-errors"), errors);
  }

  /* static/js/edit.js: the edit box (loaded after this file). */
  function edits() {
    return window.GatewayEdit || { pending: function () { return false; }, guard: function () {}, showErrors: function () {} };
  }

  function busy(card, on) {
    card.setAttribute("aria-busy", on ? "true" : "false");
    if (card.dataset.status !== "pending") return;
    card.querySelectorAll("button").forEach(function (b) { b.disabled = on; });
    if (!on) edits().guard(card);
  }

  function path(card, what) {
    return "/api/threads/" + encodeURIComponent(card.dataset.thread) + "/suspensions/" +
      encodeURIComponent(card.dataset.id) + "/" + what;
  }

  /* POST, then the card as the server has it now; `said(answer, card)` adds what to tell. */
  function post(card, what, body, errorList, said) {
    notice(card, "");
    busy(card, true);
    var id = card.dataset.id;
    return live.post(what.charAt(0) === "/" ? what : path(card, what), body).then(function (r) {
      busy(card, false);
      if (r.status === 400 && r.body.fields) {
        var errors = {};
        Object.keys(r.body.fields).forEach(function (key) {
          errors[key.replace(/^modifiedArgs\.?/, "")] = r.body.fields[key];
        });
        fieldErrors(card, errorList, errors);
        notice(card, r.body.detail || "The server refused this.");
        return;
      }
      if (r.status !== 200 && r.status !== 202 && r.status !== 409) {
        notice(card, (r.body && r.body.detail) || "The server answered " + r.status + ". Try again.");
        return;
      }
      if (r.status === 409 && r.body.error === "stale_view") {
        notice(card, r.body.detail || "This card is out of date. Reload the page.");
        return;
      }
      return refresh(id).then(function () {
        var text = said && said(r);
        if (text) notice(byId(id), text);
      });
    }, function () {
      busy(card, false);
      notice(card, "The server could not be reached. Check the connection and try again.");
      refresh(id);  // a change held while the request was on its way (whenReleased) is asked for again
    });
  }

  function send(card, body, errorList) {
    // What this decision answers: the arguments and agent version the card shows.
    var seen = {};
    if (card.dataset.argsHash) seen.args_hash = card.dataset.argsHash;
    if (card.dataset.agentVersion) seen.agent_version = Number(card.dataset.agentVersion);
    body.seen = seen;
    var confirm = card.querySelector("input[name=confirm-version]");
    if (confirm && confirm.checked) body.confirmVersionChange = true;
    if (card.dataset.stepUp === "true" && body.approved === true) return withPasskey(card, body, errorList);
    return post(card, "resume", body, errorList, decided);
  }

  function decided(r) {
    if (r.status === 409 && r.body.error === "version_changed") {
      return "Not approved yet: " + (r.body.detail || "the agent changed.");
    }
    if (r.status === 409) return "Too late: " + (r.body.detail || "someone decided first.");
    return "";
  }

  /* A step_up request (agents.policy): the approval goes with the reviewer's passkey. The
     server's challenge for this request, the browser's assertion, then the decision and the
     assertion together (approvals.stepup), answered as resumeExecution answers. */
  function withPasskey(card, body, errorList) {
    var base = "/threads/" + encodeURIComponent(card.dataset.thread) + "/suspensions/" +
      encodeURIComponent(card.dataset.id) + "/step-up/";
    if (!window.GatewayPasskeys || !window.GatewayPasskeys.supported()) {
      notice(card, "Approving this request needs a passkey, and this browser cannot use one.");
      return Promise.resolve();
    }
    notice(card, "Confirm with your passkey…");
    busy(card, true);
    return live.post(base + "options", {}).then(function (r) {
      if (r.status !== 200) throw new Error((r.body && r.body.detail) || "The server answered " + r.status + ".");
      return window.GatewayPasskeys.get(r.body);
    }).then(function (assertion) {
      busy(card, false);
      return post(card, base + "resume", { decision: body, assertion: assertion }, errorList, decided);
    }).catch(function (e) {
      busy(card, false);
      notice(card, "Not approved: " + (e && e.message ? e.message : "the passkey did not answer."));
    });
  }

  /* Approve, and grant the next similar requests (agents.grants): the ticked conditions, each
     value as the type the agent sent, the lifetime, the count and whose runs. */
  function grant(card) {
    var box = card.querySelector(".grant-box");
    var errors = {};
    var conditions = [];
    box.querySelectorAll(".grant-condition").forEach(function (row) {
      if (!row.querySelector("input[name=grant-on]").checked) return;
      var text = row.querySelector("input[name=grant-value]").value.trim();
      var value = text;
      if (row.dataset.type === "number") {
        value = Number(text);
        if (text === "" || !isFinite(value)) errors[row.dataset.arg] = "A number.";
      } else if (row.dataset.type === "boolean") {
        if (text !== "true" && text !== "false") errors[row.dataset.arg] = "true or false.";
        value = text === "true";
      }
      conditions.push({ arg: row.dataset.arg, op: row.querySelector("select[name=grant-op]").value, value: value });
    });
    var list = box.querySelector(".field-errors");
    fieldErrors(card, list, errors);
    if (Object.keys(errors).length) return;
    send(card, {
      approved: true,
      grant: {
        seconds: Number(box.querySelector("select[name=grant-seconds]").value),
        max_uses: Number(box.querySelector("input[name=grant-uses]").value),
        conditions: conditions,
        scope: box.querySelector("select[name=grant-scope]").value,
      },
    }, list);
  }

  /* POST .../extend: the deadline moves once, by a bounded amount, with a reason. */
  function extend(card) {
    var box = card.querySelector(".extend-box");
    var body = {
      seconds: Number(box.querySelector("select[name=extend-seconds]").value),
      reason: box.querySelector("input[name=extend-reason]").value.trim(),
    };
    fieldErrors(card, box.querySelector(".field-errors"), {});
    return post(card, "extend", body, box.querySelector(".field-errors"), function (r) {
      return r.status === 409 ? r.body.detail || "Too late: it was decided." : "";
    });
  }

  /* A server-drawn card has no edit, respond or extend box (templates/approvals/_card.html
     draws them on the skeleton only, to keep a page of cards small): it gets a copy of the
     skeleton's when a reviewer first opens one. */
  function boxes(card) {
    CARRIED.forEach(function (lazy) {
      if (!lazy[1]) return;
      var anchor = card.querySelector(lazy[1]);
      var source = template && template.content.querySelector(lazy[0]);
      if (card.querySelector(lazy[0]) || !anchor || !source) return;
      var box = source.cloneNode(true);
      if (lazy[2] === "before") anchor.before(box);
      else anchor.appendChild(box);
    });
  }

  function toggle(card, button, selector) {
    var box = card.querySelector(selector);
    box.hidden = !box.hidden;
    button.setAttribute("aria-expanded", String(!box.hidden));
    if (!box.hidden) {
      var first = box.querySelector("input:not([type=checkbox]), textarea, select, .schema-form input, .schema-form select");
      if (first && !first.closest("[hidden]")) first.focus();
    }
  }

  /* The card's "Approve and grant…" form, fetched the first time it is opened (the server
     draws it: GET /fragments/suspensions/<id>/grant), and put after the buttons; a card drawn
     again keeps it there (carry). */
  function grantBox(card) {
    if (card.querySelector(".grant-box")) return Promise.resolve(true);
    return get("/fragments/suspensions/" + encodeURIComponent(card.dataset.id) + "/grant").then(function (html) {
      if (html === null || card.querySelector(".grant-box")) return Boolean(card.querySelector(".grant-box"));
      var box = parse(html).firstElementChild;
      var buttons = card.querySelector(".decide-part .buttons");
      if (!box || !buttons) return false;
      buttons.after(box);
      return true;
    }, function () { return false; });
  }

  /* The thread's recent history, on demand, as the server renders it. */
  function showHistory(card, button) {
    var box = card.querySelector(".history");
    box.hidden = !box.hidden;
    button.setAttribute("aria-expanded", String(!box.hidden));
    if (box.hidden) return;
    var list = box.querySelector(".history-list");
    var note = box.querySelector(".history-note");
    fill(note, "Loading…");
    note.hidden = false;
    get("/fragments/threads/" + encodeURIComponent(card.dataset.thread) + "/history").then(function (html) {
      if (html === null) throw new Error("no history");
      list.replaceChildren(parse(html));
      note.hidden = true;
    }).catch(function () {
      fill(note, "The history could not be loaded. Open the thread instead.");
    });
  }

  /* Clicks (the keys are in static/js/keys.js) ------------------------------------------- */

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-action]");
    if (!button) return;
    var card = button.closest(".card");
    if (!card) return;
    var action = button.dataset.action;
    if (action === "history") {
      showHistory(card, button);
      return;
    }
    if (card.dataset.status !== "pending") return;
    boxes(card);
    if (action === "approve") {
      if (edits().pending(card)) return;  // the button is off meanwhile; a stale click does nothing
      send(card, { approved: true });
    } else if (action === "reject") {
      toggle(card, button, ".reject-box");
    } else if (action === "preset") {
      var reason = card.querySelector("input[name=reason]");
      reason.value = button.dataset.reason || "";
      reason.focus();
    } else if (action === "confirm-reject") {
      send(card, { approved: false, reason: card.querySelector("input[name=reason]").value.trim() });
    } else if (action === "grant") {
      grantBox(card).then(function (found) {
        if (found) toggle(card, button, ".grant-box");
      });
    } else if (action === "confirm-grant") {
      if (edits().pending(card)) return;
      grant(card);
    } else if (action === "respond") {
      toggle(card, button, ".respond-box");
    } else if (action === "confirm-respond") {
      var respondBox = card.querySelector(".respond-box");
      send(card, { response: respondBox.querySelector("textarea").value }, respondBox.querySelector(".field-errors"));
    } else if (action === "ignore") {
      send(card, { ignore: true });
    } else if (action === "extend") {
      toggle(card, button, ".extend-box");
    } else if (action === "confirm-extend") {
      extend(card);
    } else if (action === "answer") {
      var part = card.querySelector(".only-input");
      var form = part.querySelector(".schema-form");
      if (!form) {
        send(card, { response: part.querySelector("textarea").value }, part.querySelector(".field-errors"));
        return;
      }
      // A form's answer is a JSON object of its fields; the server checks it against the schema.
      var read = window.GatewayEdit.readForm(form);
      if (Object.keys(read.errors).length) {
        window.GatewayEdit.showErrors(card, part.querySelector(".field-errors"), read.errors);
        return;
      }
      send(card, { response: JSON.stringify(read.value) }, part.querySelector(".field-errors"));
    } else if (action === "decline") {
      send(card, { approved: false, reason: "" });
    }
  });

  /* Clocks: the server writes times in UTC; the reader sees their own, and the time left. */

  function showTime(element, iso) {
    var at = iso ? new Date(iso) : null;
    if (!at || isNaN(at)) return;
    var today = at.toDateString() === new Date().toDateString();
    element.textContent = (today ? "" : at.toLocaleDateString() + " ") + at.toLocaleTimeString();
  }

  /* "Rejects automatically at 09:11" in the reader's time zone. */
  function showDeadline(card) {
    card.querySelectorAll(".ladder time").forEach(function (t) { showTime(t, t.getAttribute("datetime")); });
    var when = card.querySelector(".deadline-time");
    var at = card.dataset.expires ? new Date(card.dataset.expires) : null;
    if (!when || !at || isNaN(at)) return;
    var today = at.toDateString() === new Date().toDateString();
    var time = at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    when.textContent = (today ? "" : at.toLocaleDateString([], { day: "numeric", month: "short" }) + " ") + time;
    when.title = at.toLocaleString([], { timeZoneName: "short" });
  }

  function tick(card) {
    var countdown = card.querySelector(".countdown");
    if (!countdown || card.dataset.status !== "pending" || !card.dataset.expires) return;
    var left = Math.round((Date.parse(card.dataset.expires) - Date.now()) / 1000);
    if (left <= 0) {
      countdown.textContent = "deadline passed";
      countdown.classList.add("urgent");
      return;
    }
    var h = Math.floor(left / 3600);
    var m = Math.floor((left % 3600) / 60);
    var s = left % 60;
    countdown.textContent = (h ? h + " h " : "") + (h || m ? m + " min " : "") + s + " s left";
    countdown.classList.toggle("urgent", left < 60);
  }

  setInterval(function () {
    document.querySelectorAll(".card[data-status=pending]").forEach(tick);
  }, 1000);
  document.querySelectorAll(".card[data-id]").forEach(function (card) {
    showDeadline(card);
    tick(card);
  });

  window.GatewayCards = {
    byId: byId,
    refresh: refresh,
    send: send,
    notice: notice,
    toggle: toggle,
    boxes: boxes,
    /* `handler(card)` for each card asked for that is not on the page yet. */
    onArrival: function (handler) { arrivals.push(handler); },
    /* New cards came with their own clocks to set. */
    started: function (card) {
      showDeadline(card);
      tick(card);
    },
  };
})();

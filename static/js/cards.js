/* Suspension cards. The server renders them (templates/approvals/_card.html); this file asks it
   for a card again when an event concerns it (GET /fragments/suspensions/<id>/card) and swaps the
   fresh one in, keeping what the reviewer has open or typed. Decisions go through the JSON API;
   after each the card is asked for again, and the server's refusals are shown as it words them. */
(function () {
  "use strict";

  var live = window.GatewayLive;
  var fill = window.GatewayText.fill;
  var schemas = {};  // suspension id -> its tool's input schema, read from data-schema
  var template = document.getElementById("card-template");
  var inInbox = document.body.classList.contains("inbox-page");

  function byId(id) {
    return document.getElementById("s-" + id);
  }

  /* Fetch and swap -------------------------------------------------------------------- */

  var parse = window.GatewaySwap.parse;
  var get = window.GatewaySwap.get;

  /* The card of suspension `id` as the server renders it now (in the inbox: its line once it
     has left the inbox, p.gone); null if it cannot be had. */
  function load(id) {
    var url = "/fragments/suspensions/" + encodeURIComponent(id) + "/card" + (inInbox ? "?in=inbox" : "");
    return get(url).then(function (html) {
      return html === null ? null : parse(html).firstElementChild;
    }, function () { return null; });
  }

  // The parts a reviewer opens and types in: carried from the old card into the fresh one
  // while it stays pending. [part, where a lazy one goes, before it or inside].
  var CARRIED = [
    [".reject-box"],
    [".edit-box", ".only-confirmation .shortcuts", "before"],
    [".respond-box", ".only-confirmation .shortcuts", "before"],
    [".extend-box", ".extend-part", "inside"],
    [".history"],
  ];
  var TOGGLES = {
    ".reject-box": "reject", ".edit-box": "edit", ".respond-box": "respond",
    ".extend-box": "extend", ".history": "history",
  };

  function carry(old, fresh) {
    var focused = old.contains(document.activeElement) ? document.activeElement : null;
    CARRIED.forEach(function (part) {
      var mine = old.querySelector(part[0]);
      if (!mine || (mine.hidden && !mine.dataset.built)) return;
      var theirs = fresh.querySelector(part[0]);
      if (theirs) theirs.replaceWith(mine);
      else if (part[1] && fresh.querySelector(part[1])) {
        var anchor = fresh.querySelector(part[1]);
        if (part[2] === "before") anchor.before(mine);
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

  /* Put the fresh card where the old one is. */
  function swap(old, fresh) {
    var was = old.dataset.status;
    var ignoredBefore = old.classList.contains("ignored");
    var focused = null;
    if (fresh.classList.contains("card") && fresh.dataset.status === "pending") focused = carry(old, fresh);
    var action = document.activeElement && old.contains(document.activeElement) &&
      document.activeElement.dataset ? document.activeElement.dataset.action : null;
    if (current === old) current = fresh;
    if (fresh.classList.contains("gone")) {
      // Off the inbox: the inbox puts the line in its place (static/js/inbox.js).
      old.dispatchEvent(new CustomEvent("gateway:left", { bubbles: true, detail: fresh }));
      return;
    }
    old.replaceWith(fresh);
    if (focused && fresh.contains(focused)) focused.focus();
    else if (action) {
      var same = fresh.querySelector("[data-action=" + action + "]");
      if (same && !same.disabled && !same.closest("[hidden]")) same.focus();
    }
    showDeadline(fresh);
    tick(fresh);
    guardApprove(fresh);
    if (was === "pending" && fresh.dataset.status !== "pending") {
      fresh.dispatchEvent(new CustomEvent("gateway:decided", { bubbles: true }));
    } else if (!ignoredBefore && fresh.classList.contains("ignored")) {
      fresh.dispatchEvent(new CustomEvent("gateway:ignored", { bubbles: true }));
    }
  }

  var loading = {};  // suspension id -> {done: Promise, again: bool} while a card is asked for
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
      if (fresh && old) swap(old, fresh);
      else if (fresh) arrivals.forEach(function (handler) { handler(fresh); });
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
    var ul = list || card.querySelector(".field-errors");
    var form = ul.closest(".edit-box") && ul.closest(".edit-box").querySelector(".schema-form");
    var left = form && !form.hidden ? window.GatewaySchema.showFormErrors(form, errors) : errors;
    ul.replaceChildren();
    Object.keys(left).forEach(function (path) {
      var li = document.createElement("li");
      fill(li, (path ? path + ": " : "") + left[path]);
      ul.appendChild(li);
    });
  }

  function busy(card, on) {
    card.setAttribute("aria-busy", on ? "true" : "false");
    if (card.dataset.status !== "pending") return;
    card.querySelectorAll("button").forEach(function (b) { b.disabled = on; });
    if (!on) guardApprove(card);
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
    return live.post(path(card, what), body).then(function (r) {
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
    return post(card, "resume", body, errorList, function (r) {
      if (r.status === 409 && r.body.error === "version_changed") {
        return "Not approved yet: " + (r.body.detail || "the agent changed.");
      }
      if (r.status === 409) return "Too late: " + (r.body.detail || "someone decided first.");
      return "";
    });
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
      var editor = box.querySelector("textarea[name=args]");
      if (editor) editor.value = card.dataset.args ? window.GatewayText.escapeJson(pretty(original(card))) : "";
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

  /* Editing ---------------------------------------------------------------------------- */
  /* A form generated from the tool's schema (or its JSON, for complex schemas), a before/after
     diff reviewed before "Approve edited", and the plain Approve off while an edit is pending,
     so the wrong arguments cannot be approved by accident. */

  function pretty(value) {
    return JSON.stringify(value, null, 2);
  }

  /* The arguments the card shows, as data (the .args text has control markers in it). */
  function original(card) {
    try {
      return JSON.parse(card.dataset.args);
    } catch (e) {
      return null;
    }
  }

  function jsonMode(card) {
    return !card.querySelector(".json-editor").hidden;
  }

  /* The edit as it stands: {value, errors}; errors keyed by field path ("" for the whole). */
  function currentEdit(card) {
    var box = card.querySelector(".edit-box");
    if (jsonMode(card)) {
      var value;
      try {
        value = JSON.parse(box.querySelector("textarea[name=args]").value);
      } catch (e) {
        return { value: null, errors: { "": "This is not valid JSON: " + e.message } };
      }
      if (value === null || typeof value !== "object" || Array.isArray(value)) {
        return { value: null, errors: { "": "The arguments must be a JSON object." } };
      }
      return { value: value, errors: {} };
    }
    return window.GatewaySchema.readForm(box.querySelector(".schema-form"));
  }

  function canonical(value) {
    if (Array.isArray(value)) return "[" + value.map(canonical).join(",") + "]";
    if (value && typeof value === "object") {
      return "{" + Object.keys(value).sort().map(function (k) {
        return JSON.stringify(k) + ":" + canonical(value[k]);
      }).join(",") + "}";
    }
    return JSON.stringify(value);
  }

  /* Is an edit pending (the editor differs from the arguments shown)? Approve waits for it. */
  function editPending(card) {
    var box = card.querySelector(".edit-box");
    if (!box || box.hidden) return false;
    var edit = currentEdit(card);
    return edit.value === null || Object.keys(edit.errors).length > 0 ||
      canonical(edit.value) !== canonical(original(card));
  }

  function guardApprove(card) {
    var pending = card.dataset.status === "pending" && editPending(card);
    card.classList.toggle("editing", pending);
    var approve = card.querySelector("[data-action=approve]");
    if (approve && card.getAttribute("aria-busy") !== "true") approve.disabled = pending || card.dataset.status !== "pending";
    var note = card.querySelector(".pending-edit");
    if (note) note.hidden = !pending;
  }

  /* Any change after a review hides "Approve edited" again: the diff shown is what is sent. */
  function unreview(card) {
    var box = card.querySelector(".edit-box");
    box.querySelector(".edit-diff").hidden = true;
    box.querySelector("[data-action=approve-edited]").hidden = true;
    box.querySelector("[data-action=review-edit]").hidden = false;
    delete card.dataset.reviewed;
  }

  function schemaOf(card) {
    if (!schemas[card.dataset.id]) {
      try {
        schemas[card.dataset.id] = JSON.parse(card.dataset.schema || "{}");
      } catch (e) {
        schemas[card.dataset.id] = {};
      }
    }
    return schemas[card.dataset.id];
  }

  function openEdit(card, button) {
    var size = Number(card.dataset.argsSize);
    if (size) {
      // The page holds only an excerpt of these arguments: an edit made from it would send the
      // cut text as the new arguments.
      notice(card, "These arguments are " + size.toLocaleString("en-US") + " bytes, more than a " +
        "card shows, so they cannot be edited on this page. Approve or reject them, or send " +
        "modifiedArgs through the API (POST /api/threads/…/resume).");
      return;
    }
    var box = card.querySelector(".edit-box");
    if (!box.dataset.built) {
      var schema = schemaOf(card);
      window.GatewaySchema.buildForm(box.querySelector(".schema-form"), schema, original(card) || {}, "f-" + card.dataset.id);
      box.dataset.built = "true";
      // JSON mode for a schema the form cannot show well, and for arguments holding invisible
      // or direction-changing characters: the JSON shows them escaped, a form field would
      // apply them (static/js/text.js).
      var args = JSON.stringify(original(card) || {});
      var controls = window.GatewayText.escapeJson(args) !== args;
      setMode(card, window.GatewaySchema.complex(schema) || controls ? "json" : "form");
    }
    toggle(card, button, ".edit-box");
    guardApprove(card);
  }

  function setMode(card, mode) {
    var box = card.querySelector(".edit-box");
    var form = box.querySelector(".schema-form");
    var editor = box.querySelector("textarea[name=args]");
    var toJson = mode === "json";
    if (toJson === jsonMode(card) && box.dataset.mode) return;
    // Carry the edit across: the form's value into the JSON, or the JSON into a new form.
    if (box.dataset.mode) {
      var edit = currentEdit(card);
      if (edit.value === null && !toJson) {
        fieldErrors(card, box.querySelector(".field-errors"), edit.errors);
        return;  // the JSON must parse before the form can show it
      }
      if (toJson && edit.value !== null) editor.value = window.GatewayText.escapeJson(pretty(edit.value));
      if (!toJson) window.GatewaySchema.buildForm(form, schemaOf(card), edit.value, "f-" + card.dataset.id);
    }
    box.dataset.mode = mode;
    form.hidden = toJson;
    box.querySelector(".json-editor").hidden = !toJson;
    box.querySelector("[data-action=mode-form]").setAttribute("aria-pressed", String(!toJson));
    box.querySelector("[data-action=mode-json]").setAttribute("aria-pressed", String(toJson));
    unreview(card);
    guardApprove(card);
  }

  function discardEdit(card) {
    var box = card.querySelector(".edit-box");
    var args = original(card) || {};
    box.querySelector("textarea[name=args]").value = window.GatewayText.escapeJson(pretty(args));
    window.GatewaySchema.buildForm(box.querySelector(".schema-form"), schemaOf(card), args, "f-" + card.dataset.id);
    fieldErrors(card, box.querySelector(".field-errors"), {});
    unreview(card);
    box.hidden = true;
    card.querySelector("[data-action=edit]").setAttribute("aria-expanded", "false");
    guardApprove(card);
  }

  /* Review an edit: the server checks it against the tool's schema and renders what changes
     (POST /fragments/suspensions/<id>/review); its refusals are shown beside each field. */
  function reviewEdit(card) {
    var box = card.querySelector(".edit-box");
    var list = box.querySelector(".field-errors");
    var edit = currentEdit(card);
    if (edit.value === null || Object.keys(edit.errors).length) {
      fieldErrors(card, list, edit.errors);
      unreview(card);
      return;
    }
    var value = edit.value;
    live.post("/fragments/suspensions/" + encodeURIComponent(card.dataset.id) + "/review",
              { modifiedArgs: value }).then(function (r) {
      if (r.status === 400 && r.body.fields) {
        var errors = {};
        Object.keys(r.body.fields).forEach(function (key) {
          errors[key.replace(/^modifiedArgs\.?/, "")] = r.body.fields[key];
        });
        fieldErrors(card, list, errors);
        notice(card, r.body.detail || "");
        unreview(card);
        var bad = box.querySelector("[aria-invalid=true]");
        if (bad) bad.focus();
        return;
      }
      if (r.status !== 200) {
        notice(card, (r.body && r.body.detail) || "The server answered " + r.status + ". Try again.");
        return;
      }
      fieldErrors(card, list, {});
      notice(card, "");
      var diff = box.querySelector(".edit-diff");
      diff.replaceChildren(parse(r.body.html));
      diff.hidden = false;
      box.querySelector("[data-action=approve-edited]").hidden = !r.body.changed;
      box.querySelector("[data-action=review-edit]").hidden = Boolean(r.body.changed);
      card.dataset.reviewed = canonical(value);
      if (r.body.changed) box.querySelector("[data-action=approve-edited]").focus();
    }, function () {
      notice(card, "The server could not be reached. Check the connection and try again.");
    });
  }

  function approveEdited(card) {
    var edit = currentEdit(card);
    if (edit.value === null || card.dataset.reviewed !== canonical(edit.value)) {
      reviewEdit(card);  // changed since the review: show the diff again first
      return;
    }
    send(card, { approved: true, modifiedArgs: edit.value }, card.querySelector(".edit-box .field-errors"));
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

  /* Clicks and keys -------------------------------------------------------------------- */

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
    current = card;
    boxes(card);
    if (action === "approve") {
      if (editPending(card)) return;  // the button is off meanwhile; a stale click does nothing
      send(card, { approved: true });
    } else if (action === "reject") {
      toggle(card, button, ".reject-box");
    } else if (action === "preset") {
      var reason = card.querySelector("input[name=reason]");
      reason.value = button.dataset.reason || "";
      reason.focus();
    } else if (action === "confirm-reject") {
      send(card, { approved: false, reason: card.querySelector("input[name=reason]").value.trim() });
    } else if (action === "edit") {
      openEdit(card, button);
    } else if (action === "mode-form" || action === "mode-json") {
      setMode(card, action === "mode-json" ? "json" : "form");
    } else if (action === "review-edit") {
      reviewEdit(card);
    } else if (action === "approve-edited") {
      approveEdited(card);
    } else if (action === "discard-edit") {
      discardEdit(card);
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
      send(card, { response: part.querySelector("textarea").value }, part.querySelector(".field-errors"));
    }
  });

  /* Typing in the editor keeps Approve off and the review current. */
  function edited(event) {
    var box = event.target.closest && event.target.closest(".edit-box");
    if (!box) return;
    var card = box.closest(".card");
    if (card.dataset.reviewed !== undefined) unreview(card);
    guardApprove(card);
  }
  document.addEventListener("input", edited);
  document.addEventListener("change", edited);

  /* Keyboard shortcuts on desktop (listed on each card): a approve, r reject, e edit,
     s respond, i ignore, h history, on the card last clicked or focused, else the first
     pending one. Never while typing in a field, nor with a modifier key. */
  var current = null;
  document.addEventListener("focusin", function (event) {
    var card = event.target.closest && event.target.closest(".card[data-id]");
    if (card) current = card;
  });
  var KEYS = { a: "approve", r: "reject", e: "edit", s: "respond", i: "ignore", h: "history" };

  function typing(target) {
    if (!target || !target.closest) return false;
    return Boolean(target.closest("input, textarea, select, [contenteditable], [contenteditable=true]"));
  }

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey || event.repeat) return;
    if (typing(event.target)) return;
    var action = KEYS[event.key];
    if (!action) return;
    var card = current && document.contains(current) && current.dataset.status === "pending" ? current : null;
    card = card || document.querySelector(".card[data-id][data-status=pending]:not(.read-only)");
    if (!card) return;
    var button = card.querySelector("button[data-action=" + action + "]");
    if (!button || button.hidden || button.disabled || button.closest("[hidden]")) return;
    event.preventDefault();
    current = card;
    button.click();
    if (action === "history") button.focus();
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
    /* `handler(card)` for each card asked for that is not on the page yet. */
    onArrival: function (handler) { arrivals.push(handler); },
    /* New cards came with their own clocks to set. */
    started: function (card) {
      showDeadline(card);
      tick(card);
    },
  };
})();

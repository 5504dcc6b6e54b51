/* Editing a card's arguments. The server renders the form (GET /fragments/suspensions/<id>/form,
   a typed field per argument; POST it an edit made in the JSON editor to have it as a form) and
   checks the edit ("Review changes" posts it to .../review: 400 with `fields`, shown under each
   field, or the before/after to approve). The page only reads the fields back and keeps the
   plain Approve off while an edit is pending, so the wrong arguments cannot be approved by
   accident. */
(function () {
  "use strict";

  var live = window.GatewayLive;
  var swap = window.GatewaySwap;
  var cards = window.GatewayCards;
  var fill = window.GatewayText.fill;
  var escapeJson = window.GatewayText.escapeJson;

  /* The card as it is on the page now: a card swapped in while a request was on its way took
     the edit box with it (static/js/cards.js `carry`). */
  function now(card) {
    return cards.byId(card.dataset.id) || card;
  }

  function pretty(value) {
    return JSON.stringify(value, null, 2);
  }

  function url(card, what) {
    return "/fragments/suspensions/" + encodeURIComponent(card.dataset.id) + "/" + what;
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

  /* The form's value: {value, errors}; an empty optional field is left out. Reading a field
     back is all the page does with it: the server checks what it means. */
  function readForm(form) {
    var value = {};
    var errors = {};
    form.querySelectorAll(".form-field").forEach(function (row) {
      var name = row.dataset.field;
      var input = row.querySelector("input, select, textarea");
      var kind = row.dataset.kind;
      var raw = input.type === "checkbox" ? null : input.value;
      if (input.type === "checkbox") {
        value[name] = input.checked;
      } else if (raw === "" && (kind !== "string" || !row.dataset.required)) {
        return;  // not set
      } else if (kind === "enum" || (kind === "boolean" && input.tagName === "SELECT")) {
        value[name] = JSON.parse(raw);
      } else if (kind === "integer" || kind === "number") {
        var n = Number(raw);
        if (raw.trim() === "" || isNaN(n)) errors[name] = "must be a number";
        else value[name] = n;
      } else if (kind === "string") {
        value[name] = raw;
      } else {
        try {
          value[name] = JSON.parse(raw);
        } catch (e) {
          errors[name] = "is not valid JSON";
        }
      }
    });
    return { value: value, errors: errors };
  }

  /* The edit as it stands: {value, errors}; errors keyed by field path ("" for the whole). */
  function current(card) {
    var box = card.querySelector(".edit-box");
    if (!jsonMode(card)) return readForm(box.querySelector(".schema-form"));
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

  /* Each error under its field (the top-level name of its path), the others in the list. */
  function showErrors(card, list, errors) {
    var form = list.closest(".edit-box") && list.closest(".edit-box").querySelector(".schema-form");
    var left = {};
    var rows = form && !form.hidden ? form.querySelectorAll(".form-field") : [];
    Array.prototype.forEach.call(rows, function (row) {
      var line = row.querySelector(".field-error");
      line.textContent = "";
      line.hidden = true;
      row.querySelector("input, select, textarea").removeAttribute("aria-invalid");
    });
    Object.keys(errors).forEach(function (path) {
      var top = path.split(".")[0];
      var row = Array.prototype.find.call(rows, function (r) { return r.dataset.field === top; });
      if (!row) {
        left[path] = errors[path];
        return;
      }
      var line = row.querySelector(".field-error");
      fill(line, (line.textContent ? line.textContent + "; " : "") + (path === top ? "" : path + ": ") + errors[path]);
      line.hidden = false;
      row.querySelector("input, select, textarea").setAttribute("aria-invalid", "true");
    });
    list.replaceChildren();
    Object.keys(left).forEach(function (path) {
      var li = document.createElement("li");
      fill(li, (path ? path + ": " : "") + left[path]);
      list.appendChild(li);
    });
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
  function pending(card) {
    var box = card.querySelector(".edit-box");
    if (!box || box.hidden || !box.dataset.mode) return false;
    var edit = current(card);
    return edit.value === null || Object.keys(edit.errors).length > 0 ||
      canonical(edit.value) !== canonical(original(card));
  }

  function guard(card) {
    var on = card.dataset.status === "pending" && pending(card);
    card.classList.toggle("editing", on);
    var approve = card.querySelector("[data-action=approve]");
    if (approve && card.getAttribute("aria-busy") !== "true") approve.disabled = on || card.dataset.status !== "pending";
    var note = card.querySelector(".pending-edit");
    if (note) note.hidden = !on;
  }

  /* Any change after a review hides "Approve edited" again: the diff shown is what is sent. */
  function unreview(card) {
    var box = card.querySelector(".edit-box");
    box.querySelector(".edit-diff").hidden = true;
    box.querySelector("[data-action=approve-edited]").hidden = true;
    box.querySelector("[data-action=review-edit]").hidden = false;
    delete card.dataset.reviewed;
  }

  /* The form the server renders for the card's arguments (no value), or for `value`. */
  function loadForm(card, value) {
    var asked = value === undefined ? swap.get(url(card, "form")) :
      live.post(url(card, "form"), { modifiedArgs: value }).then(function (r) {
        return r.status === 200 ? r.body.html : null;
      });
    return asked.then(function (html) {
      if (typeof html !== "string") throw new Error("no form");
      var form = swap.parse(html).firstElementChild;
      var old = now(card).querySelector(".edit-box .schema-form");
      form.hidden = old.hidden;
      old.replaceWith(form);
      return form;
    });
  }

  function setMode(card, mode) {
    card = now(card);
    var box = card.querySelector(".edit-box");
    var toJson = mode === "json";
    if (toJson === jsonMode(card) && box.dataset.mode) return Promise.resolve();
    var editor = box.querySelector("textarea[name=args]");
    var carried = Promise.resolve();
    // Carry the edit across: the form's value into the JSON, or the JSON into a new form.
    if (box.dataset.mode) {
      var edit = current(card);
      if (edit.value === null && !toJson) {
        showErrors(card, box.querySelector(".field-errors"), edit.errors);
        return Promise.resolve();  // the JSON must parse before the form can show it
      }
      if (toJson && edit.value !== null) editor.value = escapeJson(pretty(edit.value));
      if (!toJson) carried = loadForm(card, edit.value);
    }
    return carried.then(function () {
      card = now(card);
      box = card.querySelector(".edit-box");
      box.dataset.mode = mode;
      box.querySelector(".schema-form").hidden = toJson;
      box.querySelector(".json-editor").hidden = !toJson;
      box.querySelector("[data-action=mode-form]").setAttribute("aria-pressed", String(!toJson));
      box.querySelector("[data-action=mode-json]").setAttribute("aria-pressed", String(toJson));
      unreview(card);
      guard(card);
    }, function () {
      cards.notice(card, "The form could not be loaded. Edit the JSON instead.");
    });
  }

  function open(card, button) {
    var size = Number(card.dataset.argsSize);
    if (size) {
      // The page holds only an excerpt of these arguments: an edit made from it would send the
      // cut text as the new arguments.
      cards.notice(card, "These arguments are " + size.toLocaleString("en-US") + " bytes, more than a " +
        "card shows, so they cannot be edited on this page. Approve or reject them, or send " +
        "modifiedArgs through the API (POST /api/threads/…/resume).");
      return;
    }
    var box = card.querySelector(".edit-box");
    if (box.dataset.mode) {
      cards.toggle(card, button, ".edit-box");
      guard(card);
      return;
    }
    box.querySelector("textarea[name=args]").value = card.dataset.args ? escapeJson(pretty(original(card))) : "";
    loadForm(card).then(function (form) {
      // JSON mode for a schema the form cannot show well, and for arguments holding invisible
      // or direction-changing characters: the JSON shows them escaped, a form field would
      // apply them (the server says which: data-prefer).
      return setMode(card, form.dataset.prefer === "json" ? "json" : "form");
    }, function () {
      return setMode(card, "json");
    }).then(function () {
      card = now(card);
      cards.toggle(card, card.querySelector("[data-action=edit]") || button, ".edit-box");
      guard(card);
    });
  }

  function discard(card) {
    var box = card.querySelector(".edit-box");
    box.querySelector("textarea[name=args]").value = escapeJson(pretty(original(card) || {}));
    loadForm(card).catch(function () { /* the old form stays */ });
    showErrors(card, box.querySelector(".field-errors"), {});
    unreview(card);
    box.hidden = true;
    card.querySelector("[data-action=edit]").setAttribute("aria-expanded", "false");
    guard(card);
  }

  function fieldsOf(body) {
    var errors = {};
    Object.keys(body.fields || {}).forEach(function (key) {
      errors[key.replace(/^modifiedArgs\.?/, "")] = body.fields[key];
    });
    return errors;
  }

  /* Review an edit: the server checks it against the tool's schema and renders what changes;
     its refusals are shown beside each field. */
  function review(card) {
    var box = card.querySelector(".edit-box");
    var list = box.querySelector(".field-errors");
    var edit = current(card);
    if (edit.value === null || Object.keys(edit.errors).length) {
      showErrors(card, list, edit.errors);
      unreview(card);
      return;
    }
    var value = edit.value;
    live.post(url(card, "review"), { modifiedArgs: value }).then(function (r) {
      card = now(card);
      box = card.querySelector(".edit-box");
      list = box.querySelector(".field-errors");
      if (r.status === 400 && r.body.fields) {
        showErrors(card, list, fieldsOf(r.body));
        cards.notice(card, r.body.detail || "");
        unreview(card);
        var bad = box.querySelector("[aria-invalid=true]");
        if (bad) bad.focus();
        return;
      }
      if (r.status !== 200) {
        cards.notice(card, (r.body && r.body.detail) || "The server answered " + r.status + ". Try again.");
        return;
      }
      showErrors(card, list, {});
      cards.notice(card, "");
      var diff = box.querySelector(".edit-diff");
      diff.replaceChildren(swap.parse(r.body.html));
      diff.hidden = false;
      box.querySelector("[data-action=approve-edited]").hidden = !r.body.changed;
      box.querySelector("[data-action=review-edit]").hidden = Boolean(r.body.changed);
      card.dataset.reviewed = canonical(value);
      if (r.body.changed) box.querySelector("[data-action=approve-edited]").focus();
    }, function () {
      cards.notice(card, "The server could not be reached. Check the connection and try again.");
    });
  }

  function approveEdited(card) {
    var edit = current(card);
    if (edit.value === null || card.dataset.reviewed !== canonical(edit.value)) {
      review(card);  // changed since the review: show the diff again first
      return;
    }
    cards.send(card, { approved: true, modifiedArgs: edit.value }, card.querySelector(".edit-box .field-errors"));
  }

  var ACTIONS = {
    edit: open,
    "mode-form": function (card) { setMode(card, "form"); },
    "mode-json": function (card) { setMode(card, "json"); },
    "review-edit": review,
    "approve-edited": approveEdited,
    "discard-edit": discard,
  };

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-action]");
    var card = button && button.closest(".card");
    var action = button && ACTIONS[button.dataset.action];
    if (!card || !action || card.dataset.status !== "pending") return;
    cards.boxes(card);
    action(card, button);
  });

  /* Typing in the editor keeps Approve off and the review current. */
  function edited(event) {
    var box = event.target.closest && event.target.closest(".edit-box");
    if (!box) return;
    var card = box.closest(".card");
    if (card.dataset.reviewed !== undefined) unreview(card);
    guard(card);
  }
  document.addEventListener("input", edited);
  document.addEventListener("change", edited);

  window.GatewayEdit = { pending: pending, guard: guard, showErrors: showErrors, readForm: readForm };
})();

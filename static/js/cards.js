/* Suspension cards: built from the server's <template> with textContent only (invariant 6),
   decided through the JSON API, updated in place by SUSPENSION_* events. */
(function () {
  "use strict";

  var live = window.GatewayLive;
  var schemas = Object.assign({}, live.data.schemas || {});
  var template = document.getElementById("card-template");

  function byId(id) {
    return document.getElementById("s-" + id);
  }

  function outcomeText(o) {
    var text = String(o.status || "").replace("_", " ");
    if (o.decided_by) text += " by " + o.decided_by;
    if (o.response !== null && o.response !== undefined && o.response !== "") text += ": " + o.response;
    else if (o.reason) text += ": " + o.reason;
    if (o.modifiedArgs) text += " (arguments edited)";
    return text;
  }

  function pretty(value) {
    return JSON.stringify(value, null, 2);
  }

  /* A new card element for a suspension payload (agents.actions.suspension_payload). */
  function build(s) {
    var card = template.content.firstElementChild.cloneNode(true);
    var kindPart = card.querySelector(s.kind === "input" ? ".only-confirmation" : ".only-input");
    if (kindPart) kindPart.remove();
    card.id = "s-" + s.id;
    card.dataset.id = s.id;
    card.dataset.thread = s.thread;
    card.dataset.status = s.status;
    card.dataset.kind = s.kind;
    card.dataset.agent = s.agent;
    card.dataset.tool = s.tool;
    card.dataset.group = s.group;
    card.dataset.expires = s.expires_at || "";
    card.querySelector(".agent").textContent = s.agent;
    card.querySelector(".lineage").textContent = s.lineage || "";
    card.querySelector(".tool").textContent = s.tool;
    var prompt = card.querySelector(".prompt");
    prompt.textContent = s.prompt || "";
    prompt.hidden = !s.prompt;
    card.querySelector(".args").textContent = pretty(s.input);
    card.querySelector(".group-id").textContent = String(s.group).slice(0, 8);
    card.querySelector(".thread-link").href = "/threads/" + encodeURIComponent(s.thread) + "/";
    var editor = card.querySelector("textarea[name=args]");
    if (editor) editor.value = pretty(s.input);
    schemas[s.id] = s.schema || {};
    setStatus(card, s.status);
    if (s.decision) decided(card, s.decision);
    tick(card);
    return card;
  }

  function setStatus(card, status) {
    card.dataset.status = status;
    var badge = card.querySelector(".status");
    badge.textContent = status.replace("_", " ");
    badge.dataset.status = status;
  }

  /* The card shows a recorded outcome; nothing on it can be sent any more. */
  function decided(card, outcome) {
    setStatus(card, outcome.status);
    card.classList.add("decided");
    var line = card.querySelector(".outcome");
    line.textContent = outcomeText(outcome);
    line.hidden = false;
    card.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
    card.querySelectorAll(".reject-box, .edit-box").forEach(function (box) { box.hidden = true; });
    card.querySelectorAll("textarea, input").forEach(function (field) { field.disabled = true; });
    var countdown = card.querySelector(".countdown");
    if (countdown) countdown.textContent = "";
    card.dispatchEvent(new CustomEvent("gateway:decided", { bubbles: true }));
  }

  function notice(card, text) {
    var p = card.querySelector(".notice");
    p.textContent = text;
    p.hidden = !text;
  }

  function fieldErrors(card, list, errors) {
    var ul = list || card.querySelector(".field-errors");
    ul.replaceChildren();
    Object.keys(errors).forEach(function (path) {
      var li = document.createElement("li");
      li.textContent = (path ? path + ": " : "") + errors[path];
      ul.appendChild(li);
    });
  }

  function busy(card, on) {
    card.setAttribute("aria-busy", on ? "true" : "false");
    if (card.dataset.status !== "pending") return;
    card.querySelectorAll("button").forEach(function (b) { b.disabled = on; });
  }

  function send(card, body, errorList) {
    notice(card, "");
    busy(card, true);
    var path = "/api/threads/" + encodeURIComponent(card.dataset.thread) + "/suspensions/" +
      encodeURIComponent(card.dataset.id) + "/resume";
    return live.post(path, body).then(function (r) {
      busy(card, false);
      if (r.status === 200 || r.status === 202) {
        decided(card, r.body.outcome);
      } else if (r.status === 409) {
        decided(card, r.body.outcome);
        notice(card, "Too late: " + (r.body.detail || "someone decided first."));
      } else if (r.status === 400 && r.body.fields) {
        var errors = {};
        Object.keys(r.body.fields).forEach(function (key) {
          errors[key.replace(/^modifiedArgs\.?/, "")] = r.body.fields[key];
        });
        fieldErrors(card, errorList, errors);
        notice(card, r.body.detail || "The server refused this decision.");
      } else {
        notice(card, r.body.detail || "The server answered " + r.status + ". Try again.");
      }
    }, function () {
      busy(card, false);
      notice(card, "The server could not be reached. Check the connection and try again.");
    });
  }

  function toggle(card, button, selector) {
    var box = card.querySelector(selector);
    box.hidden = !box.hidden;
    button.setAttribute("aria-expanded", String(!box.hidden));
    if (!box.hidden) box.querySelector("input, textarea").focus();
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-action]");
    if (!button) return;
    var card = button.closest(".card");
    if (!card || card.dataset.status !== "pending") return;
    var action = button.dataset.action;
    if (action === "approve") {
      send(card, { approved: true });
    } else if (action === "reject") {
      toggle(card, button, ".reject-box");
    } else if (action === "confirm-reject") {
      send(card, { approved: false, reason: card.querySelector("input[name=reason]").value.trim() });
    } else if (action === "edit") {
      toggle(card, button, ".edit-box");
    } else if (action === "approve-edited") {
      var box = card.querySelector(".edit-box");
      var list = box.querySelector(".field-errors");
      var args;
      try {
        args = JSON.parse(box.querySelector("textarea").value);
      } catch (e) {
        fieldErrors(card, list, { "": "This is not valid JSON: " + e.message });
        return;
      }
      if (args === null || typeof args !== "object" || Array.isArray(args)) {
        fieldErrors(card, list, { "": "The arguments must be a JSON object." });
        return;
      }
      var errors = window.GatewaySchema.validate(schemas[card.dataset.id] || {}, args);
      fieldErrors(card, list, errors);
      if (Object.keys(errors).length) return;
      send(card, { approved: true, modifiedArgs: args }, list);
    } else if (action === "answer") {
      var part = card.querySelector(".only-input");
      var text = part.querySelector("textarea").value;
      if (!text.trim()) {
        fieldErrors(card, part.querySelector(".field-errors"), { "": "Write an answer first." });
        return;
      }
      send(card, { response: text }, part.querySelector(".field-errors"));
    }
  });

  /* Apply SUSPENSION_DECIDED / _TIMEOUT / _CANCELLED to the card if it is on the page. */
  function applyEvent(message) {
    var card = message.suspension && byId(message.suspension);
    if (!card) return;
    var p = message.payload || {};
    if (message.type === "SUSPENSION_DECIDED") {
      decided(card, p);
    } else if (message.type === "SUSPENSION_TIMEOUT") {
      decided(card, {
        status: "timed_out",
        reason: (p.approved ? "approved" : "rejected") + " automatically at the deadline",
      });
    } else if (message.type === "SUSPENSION_CANCELLED") {
      decided(card, { status: "cancelled", decided_by: p.decided_by, reason: "the run was cancelled" });
    }
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
  document.querySelectorAll(".card[data-id]").forEach(tick);

  window.GatewayCards = { build: build, byId: byId, applyEvent: applyEvent, schemas: schemas };
})();

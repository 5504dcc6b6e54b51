/* Suspension cards: built from the server's <template> with text nodes only, controls marked
   (invariant 6, static/js/text.js), decided through the JSON API, updated in place by
   SUSPENSION_* events. */
(function () {
  "use strict";

  var live = window.GatewayLive;
  var fill = window.GatewayText.fill;
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

  /* Who may decide (agents.policy): the page knows who is looking (approvals.views.me) and
     says why they may not, with the words of agents.policy.why_not. */
  var me = live.data.me || {};

  function more(n) {
    return n + " more approval" + (n === 1 ? "" : "s");
  }

  function oneOf(groups) {
    if (groups.length === 1) return "group " + groups[0];
    return "groups " + groups.slice(0, -1).join(", ") + " or " + groups[groups.length - 1];
  }

  /* Why the viewer may not decide whatever the votes say; "" when they may. */
  function standing(p) {
    var groups = p.groups || [];
    var mine = me.groups || [];
    if (!me.may_decide) return "";  // no decision controls are drawn for them at all
    if (groups.length && !groups.some(function (g) { return mine.indexOf(g) !== -1; })) {
      return "Only " + oneOf(groups) + " may decide this request.";
    }
    if (p.four_eyes && p.started_by && p.started_by === me.username) {
      return "You started this run; someone else must decide it (four eyes).";
    }
    return "";
  }

  /* "1 of 2 approvals", and the card read-only (its decision buttons not offered) for a viewer
     who may not decide it, with why. */
  function showPolicy(card, approvals, quorum, approvedBy) {
    var pending = card.dataset.status === "pending";
    quorum = Number(quorum) || 1;
    card.dataset.quorum = String(quorum);
    var votes = card.querySelector(".votes");
    votes.hidden = quorum <= 1;
    votes.querySelector(".approvals").textContent = String(approvals || 0);
    votes.querySelector(".quorum").textContent = String(quorum);
    votes.title = (approvedBy || []).join(", ");
    var why = card.dataset.standing || "";
    if (!why && quorum > 1 && (approvedBy || []).indexOf(me.username) !== -1) {
      why = "You already approved; waiting for " + more(quorum - approvals) + ".";
    }
    var line = card.querySelector(".why-not");
    fill(line, why);
    line.hidden = !why;
    var readOnly = pending && Boolean(why);
    card.classList.toggle("read-only", readOnly);
    card.querySelectorAll(".decide-part").forEach(function (part) { part.hidden = readOnly; });
    card.querySelector(".policy-line").hidden = !pending || (quorum <= 1 && !why);
  }

  /* The arguments a quorum now votes on: a reviewer's edit restarts the count. */
  function showArgs(card, args) {
    fill(card.querySelector(".args"), pretty(args));
    var editor = card.querySelector("textarea[name=args]");
    if (editor) editor.value = window.GatewayText.escapeJson(pretty(args));
  }

  /* A new card element for a suspension payload (agents.actions.suspension_payload). `cut`: the
     payload is a socket summary whose whole event could not be fetched (static/js/live.js). */
  function build(s, cut) {
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
    card.dataset.argsHash = s.args_hash || "";
    card.dataset.agentVersion = s.agent_version == null ? "" : String(s.agent_version);
    fill(card.querySelector(".agent"), s.agent);
    fill(card.querySelector(".lineage"), s.lineage || "");
    fill(card.querySelector(".tool"), s.tool);
    var prompt = card.querySelector(".prompt");
    fill(prompt, s.prompt || "");
    prompt.hidden = !s.prompt;
    fill(card.querySelector(".args"), pretty(s.input));
    card.querySelector(".group-id").textContent = String(s.group).slice(0, 8);
    card.querySelector(".thread-link").href = "/threads/" + encodeURIComponent(s.thread) + "/";
    var editor = card.querySelector("textarea[name=args]");
    if (editor) editor.value = window.GatewayText.escapeJson(pretty(s.input));
    schemas[s.id] = s.schema || {};
    showLadder(card, s.ladder, s.on_timeout);
    showExtension(card, s.extension);
    if (s.version && s.version.changed) showVersionChange(card, s.version.detail);
    setStatus(card, s.status);
    var p = s.policy || {};
    card.dataset.standing = standing(p);
    showPolicy(card, p.approvals, p.quorum, p.approved_by);
    if (p.edited_args) showArgs(card, p.edited_args);
    if (s.decision) decided(card, s.decision);
    if (cut) {
      // Cut arguments must not be approved as an edit: editing waits for the whole of them.
      var edit = card.querySelector("[data-action=edit]");
      if (edit) edit.remove();
      notice(card, "These arguments were too long to show live and are cut. Reload the page to see them whole.");
    }
    tick(card);
    return card;
  }

  function setStatus(card, status) {
    card.dataset.status = status;
    var badge = card.querySelector(".status");
    badge.textContent = status.replace("_", " ");
    badge.dataset.status = status;
  }

  /* 1800 → "30 min"; approvals/templatetags/durations.py mirrors this. */
  function duration(seconds) {
    if (seconds % 3600 === 0) return seconds / 3600 + " h";
    if (seconds % 60 === 0) return seconds / 60 + " min";
    return seconds + " s";
  }

  /* A <time> of the ladder in the reader's local time (the server writes ISO 8601). */
  function showTime(element, iso) {
    element.setAttribute("datetime", iso || "");
    var at = iso ? new Date(iso) : null;
    if (!at || isNaN(at)) {
      element.textContent = iso || "";
      return;
    }
    var today = at.toDateString() === new Date().toDateString();
    element.textContent = (today ? "" : at.toLocaleDateString() + " ") + at.toLocaleTimeString();
  }

  /* When the next reminder goes, whom it escalates to (or was escalated to), and what the
     deadline does: agents.actions.ladder_payload. */
  function showLadder(card, ladder, onTimeout) {
    var l = ladder || {};
    var next = card.querySelector(".next-reminder");
    next.hidden = !l.next_reminder_at;
    showTime(next.querySelector("time"), l.next_reminder_at);
    var escalation = card.querySelector(".escalation");
    escalation.hidden = !l.escalate_to;
    card.classList.toggle("escalated", Boolean(l.escalated_at));
    escalation.querySelector(".escalation-verb").textContent = l.escalated_at ? "Escalated to" : "Escalates to";
    fill(escalation.querySelector(".escalate-to"), l.escalate_to || "");
    escalation.querySelector(".escalation-time").hidden = Boolean(l.escalated_at);
    showTime(escalation.querySelector(".escalation-time time"), l.escalate_at);
    if (onTimeout) card.querySelector(".on-timeout").textContent = onTimeout === "approve" ? "approved" : "rejected";
  }

  /* Who moved the deadline, by how much and why; a deadline moves once, so the form goes. */
  function showExtension(card, extension) {
    var line = card.querySelector(".extension");
    line.hidden = !extension;
    if (!extension) return;
    fill(line.querySelector(".extension-amount"), duration(extension.seconds));
    fill(line.querySelector(".extension-by"), extension.by || "someone");
    fill(line.querySelector(".extension-reason"), extension.reason || "");
    var part = card.querySelector(".extend-part");
    if (part) part.hidden = true;
  }

  function moveDeadline(card, expiresAt) {
    card.dataset.expires = expiresAt || "";
    tick(card);
  }

  /* The card shows a recorded outcome; nothing on it can be sent any more. */
  function decided(card, outcome) {
    setStatus(card, outcome.status);
    card.classList.add("decided");
    var line = card.querySelector(".outcome");
    fill(line, outcomeText(outcome));
    line.hidden = false;
    card.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
    card.querySelectorAll(".reject-box, .edit-box, .extend-box").forEach(function (box) { box.hidden = true; });
    card.querySelectorAll("textarea, input").forEach(function (field) { field.disabled = true; });
    var countdown = card.querySelector(".countdown");
    if (countdown) countdown.textContent = "";
    card.classList.remove("read-only");
    card.querySelector(".policy-line").hidden = true;
    card.dispatchEvent(new CustomEvent("gateway:decided", { bubbles: true }));
  }

  function notice(card, text) {
    var p = card.querySelector(".notice");
    fill(p, text);
    p.hidden = !text;
  }

  function fieldErrors(card, list, errors) {
    var ul = list || card.querySelector(".field-errors");
    ul.replaceChildren();
    Object.keys(errors).forEach(function (path) {
      var li = document.createElement("li");
      fill(li, (path ? path + ": " : "") + errors[path]);
      ul.appendChild(li);
    });
  }

  function busy(card, on) {
    card.setAttribute("aria-busy", on ? "true" : "false");
    if (card.dataset.status !== "pending") return;
    card.querySelectorAll("button").forEach(function (b) { b.disabled = on; });
  }

  /* The agent or its tool changed since the request was made (agents.versions): the card says
     how, and an approval needs the reviewer's explicit confirmation. */
  function showVersionChange(card, detail) {
    var box = card.querySelector(".version-warning");
    if (!box) return;
    fill(box.querySelector(".version-detail"), detail || "The agent changed since this request was made.");
    box.hidden = false;
  }

  function send(card, body, errorList) {
    notice(card, "");
    // What this decision answers: the arguments and agent version the card shows.
    var seen = {};
    if (card.dataset.argsHash) seen.args_hash = card.dataset.argsHash;
    if (card.dataset.agentVersion) seen.agent_version = Number(card.dataset.agentVersion);
    body.seen = seen;
    var confirm = card.querySelector("input[name=confirm-version]");
    if (confirm && confirm.checked) body.confirmVersionChange = true;
    busy(card, true);
    var path = "/api/threads/" + encodeURIComponent(card.dataset.thread) + "/suspensions/" +
      encodeURIComponent(card.dataset.id) + "/resume";
    return live.post(path, body).then(function (r) {
      busy(card, false);
      if (r.status === 202 && r.body.outcome === null) {
        // A vote toward a quorum: the request waits for more (agents.policy).
        var p = r.body.suspension.policy || {};
        showPolicy(card, p.approvals, p.quorum, p.approved_by);
        if (p.edited_args) showArgs(card, p.edited_args);
      } else if (r.status === 200 || r.status === 202) {
        decided(card, r.body.outcome);
      } else if (r.status === 409 && r.body.error === "version_changed") {
        showVersionChange(card, r.body.suspension && r.body.suspension.version && r.body.suspension.version.detail);
        notice(card, "Not approved yet: " + (r.body.detail || "the agent changed.") + "");
      } else if (r.status === 409 && r.body.error === "stale_view") {
        notice(card, r.body.detail || "This card is out of date. Reload the page.");
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

  /* POST .../extend: the deadline moves once, by a bounded amount, with a reason. */
  function extend(card) {
    var box = card.querySelector(".extend-box");
    var list = box.querySelector(".field-errors");
    var reason = box.querySelector("input[name=extend-reason]").value.trim();
    if (!reason) {
      fieldErrors(card, list, { reason: "Say why the deadline moves." });
      return;
    }
    fieldErrors(card, list, {});
    notice(card, "");
    busy(card, true);
    var path = "/api/threads/" + encodeURIComponent(card.dataset.thread) + "/suspensions/" +
      encodeURIComponent(card.dataset.id) + "/extend";
    var seconds = Number(box.querySelector("select[name=extend-seconds]").value);
    live.post(path, { seconds: seconds, reason: reason }).then(function (r) {
      busy(card, false);
      var s = r.body && r.body.suspension;
      if (r.status === 200 || (r.status === 409 && r.body.error === "already_extended")) {
        moveDeadline(card, s.expires_at);
        showLadder(card, s.ladder, s.on_timeout);
        showExtension(card, s.extension);
        if (r.status === 409) notice(card, r.body.detail);
      } else if (r.status === 409) {
        if (s && s.decision) decided(card, s.decision);
        notice(card, "Too late: " + (r.body.detail || "it was decided."));
      } else if (r.status === 400 && r.body.fields) {
        fieldErrors(card, list, r.body.fields);
      } else {
        notice(card, (r.body && r.body.detail) || "The server answered " + r.status + ". Try again.");
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
    } else if (action === "extend") {
      toggle(card, button, ".extend-box");
    } else if (action === "confirm-extend") {
      extend(card);
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
    } else if (message.type === "SUSPENSION_REMINDER" || message.type === "SUSPENSION_ESCALATED") {
      if (card.dataset.status === "pending") showLadder(card, p.ladder);
    } else if (message.type === "SUSPENSION_VOTED") {
      if (card.dataset.status !== "pending") return;
      showPolicy(card, p.approvals, p.required, p.approved_by);
      if (p.edited_args) showArgs(card, p.edited_args);
    } else if (message.type === "SUSPENSION_EXTENDED") {
      if (card.dataset.status !== "pending") return;
      moveDeadline(card, p.expires_at);
      showLadder(card, p.ladder);
      showExtension(card, { by: p.by, seconds: p.seconds, reason: p.reason });
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
  document.querySelectorAll(".card[data-id]").forEach(function (card) {
    card.querySelectorAll(".ladder time").forEach(function (t) { showTime(t, t.getAttribute("datetime")); });
    tick(card);
  });

  window.GatewayCards = { build: build, byId: byId, applyEvent: applyEvent, schemas: schemas };
})();

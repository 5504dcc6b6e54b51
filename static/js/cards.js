/* Suspension cards: built from the server's <template> with text nodes only, controls marked
   (invariant 6, static/js/text.js), decided through the JSON API, updated in place by
   SUSPENSION_* events. */
(function () {
  "use strict";

  var live = window.GatewayLive;
  var fill = window.GatewayText.fill;
  var excerpt = window.GatewayText.excerpt;
  var cut = window.GatewayText.cut;
  var schemas = Object.assign({}, live.data.schemas || {});
  var template = document.getElementById("card-template");

  function byId(id) {
    return document.getElementById("s-" + id);
  }

  function outcomeText(o) {
    var text = String(o.status || "").replace("_", " ");
    if (o.status === "responded") text = "answered instead of deciding";
    if (o.decided_by) text += " by " + o.decided_by;
    if (o.response !== null && o.response !== undefined && o.response !== "") text += ": " + o.response;
    else if (o.reason) text += ": " + o.reason;
    if (o.modifiedArgs) text += " (arguments edited)";
    return text;
  }

  function pretty(value) {
    return JSON.stringify(value, null, 2);
  }

  /* Who may decide (agents.policy): the page knows who is looking (approvals.cards.me) and
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
    showRaw(card, args);
    showFields(card, args);
    fill(card.querySelector(".summary"), fillSummary(card.dataset.summaryTemplate, args) || card.dataset.tool);
  }

  /* Where the whole request is, as text (the cut notes link to it). */
  function wholeUrl(card) {
    return "/api/suspensions/" + encodeURIComponent(card.dataset.id);
  }

  /* The raw JSON view, data-args and the editor, as approvals/cards.py `card` renders them: the
     arguments whole while their JSON fits a card (DISPLAY_MAX_CARD_BYTES), else cut at the value
     limit, with no data-args and an empty editor: the card refuses to edit them (openEdit). */
  function showRaw(card, args) {
    var whole = pretty(args);
    var fits = !cut(whole, window.GatewayText.limit("displayCard")).cut;
    var shown = excerpt(card.querySelector(".args"), fits ? { text: whole, cut: 0 } : whole, wholeUrl(card));
    card.dataset.args = fits ? JSON.stringify(args) : "";
    card.dataset.argsSize = String(fits ? 0 : shown.size);
    var editor = card.querySelector("textarea[name=args]");
    if (editor) editor.value = fits ? window.GatewayText.escapeJson(whole) : "";
    var line = card.querySelector(".args-cut");
    line.hidden = fits;
    fill(line.querySelector(".args-size"), fits ? "" : shown.size.toLocaleString("en-US"));
  }

  /* The tool's summary template filled with arguments: agents/presentation.py `fill`. */
  var PLACEHOLDER = /\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\}/g;

  function valueText(value) {
    var text;
    if (value === null || value === undefined) text = "";
    else if (typeof value === "boolean") text = value ? "yes" : "no";
    else if (typeof value === "string") text = value;
    else text = JSON.stringify(value).replace(/,/g, ", ").replace(/":/g, "\": ");
    text = text.split(/\s+/).filter(Boolean).join(" ");
    return Array.from(text).length <= 120 ? text : Array.from(text).slice(0, 119).join("") + "…";
  }

  function lookup(args, path) {
    var value = args;
    var parts = path.split(".");
    for (var i = 0; i < parts.length; i++) {
      if (!value || typeof value !== "object" || Array.isArray(value) ||
          !Object.prototype.hasOwnProperty.call(value, parts[i])) return undefined;
      value = value[parts[i]];
    }
    return value;
  }

  function fillSummary(template, args) {
    if (!template) return "";
    return template.replace(PLACEHOLDER, function (_, path) { return valueText(lookup(args, path)); })
      .split(/\s+/).filter(Boolean).join(" ");
  }

  /* One argument as the table shows it: approvals/templatetags/cards.py `value_text`. */
  function cellText(value) {
    if (typeof value === "string") return value;
    if (value !== null && typeof value === "object") return JSON.stringify(value, null, 2);
    return JSON.stringify(value);
  }

  /* approvals/templatetags/cards.py `_order`: required fields first, then the rest by name. */
  function fieldOrder(schema, values) {
    return window.GatewaySchema.fieldNames(schema, values);
  }

  /* The arguments as a table of fields (the raw JSON stays behind its toggle), each value cut
     at the value limit and all of them at the card limit (approvals/templatetags/cards.py). */
  function showFields(card, args) {
    var body = card.querySelector(".fields tbody");
    if (!body) return;
    body.replaceChildren();
    if (!args || typeof args !== "object") return;
    var budget = window.GatewayText.limit("displayCard");
    var url = wholeUrl(card);
    function show(element, text) {
      var shown = excerpt(element, cut(text, Math.min(window.GatewayText.limit("displayValue"), budget)), url);
      budget -= window.GatewayText.size(shown.text);
    }
    fieldOrder(schemas[card.dataset.id], [args]).forEach(function (name) {
      if (!Object.prototype.hasOwnProperty.call(args, name)) return;
      var tr = document.createElement("tr");
      tr.dataset.field = name;
      var th = document.createElement("th");
      th.scope = "row";
      fill(th, name);
      var td = document.createElement("td");
      var value = args[name];
      var text = cellText(value);
      // A block, or a cut value, goes in a box of its own height (static/css/cards.css).
      if ((value !== null && typeof value === "object") || cut(text, budget).cut || cut(text).cut) {
        var pre = document.createElement("pre");
        show(pre, text);
        td.appendChild(pre);
      } else {
        show(td, text);
      }
      tr.appendChild(th);
      tr.appendChild(td);
      body.appendChild(tr);
    });
  }

  /* Rows of a before/after table: every field, the changed ones marked. Returns how many
     changed. */
  function diffTable(body, schema, before, after) {
    body.replaceChildren();
    var changed = 0;
    fieldOrder(schema, [before, after]).forEach(function (name) {
      var had = before && Object.prototype.hasOwnProperty.call(before, name);
      var has = after && Object.prototype.hasOwnProperty.call(after, name);
      if (!had && !has) return;
      var old = had ? cellText(before[name]) : "";
      var now = has ? cellText(after[name]) : "";
      var tr = document.createElement("tr");
      var differs = had !== has || JSON.stringify(before[name]) !== JSON.stringify(after[name]);
      if (differs) {
        tr.className = "changed";
        changed += 1;
      }
      var th = document.createElement("th");
      th.scope = "row";
      fill(th, name);
      var td1 = document.createElement("td");
      td1.className = "before";
      excerpt(td1, had ? old : "(not set)");
      var td2 = document.createElement("td");
      td2.className = "after";
      excerpt(td2, has ? now : "(not set)");
      tr.appendChild(th);
      tr.appendChild(td1);
      tr.appendChild(td2);
      body.appendChild(tr);
    });
    return changed;
  }

  /* A new card element for a suspension payload (agents.payloads.suspension_payload).
     `summary`: the payload is a socket summary whose whole event could not be fetched
     (static/js/live.js). */
  function build(s, summary) {
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
    card.dataset.onTimeout = s.on_timeout || "reject";
    var shown = s.presentation || {};
    card.dataset.summaryTemplate = shown.summary_template || "";
    fill(card.querySelector(".agent"), shown.asker || s.agent);
    fill(card.querySelector(".via"), shown.asked_via || "");
    card.querySelector(".lineage").hidden = !shown.asked_via;
    fill(card.querySelector(".summary"), shown.summary || s.tool);
    fill(card.querySelector(".tool"), s.tool);
    var description = card.querySelector(".description");
    fill(description, shown.description || "");
    description.hidden = !shown.description;
    var prompt = card.querySelector(".prompt");
    excerpt(prompt, s.prompt || "", wholeUrl(card));
    card.querySelector(".reasoning").hidden = !s.prompt;
    showRaw(card, s.input);
    card.querySelector(".thread-link").href = "/threads/" + encodeURIComponent(s.thread) + "/";
    schemas[s.id] = s.schema || {};
    showFields(card, s.input);
    var approveDoes = card.querySelector(".approve-does");
    fill(card.querySelector(".approve-text"), shown.approve_does || "");
    approveDoes.hidden = !shown.approve_does;
    card.querySelector(".deadline").hidden = !s.expires_at;
    showPresets(card, shown.reject_reasons || []);
    showAllowed(card, (s.policy || {}).allow);
    if (s.ignored && s.status === "pending") ignored(card, s.ignored);
    showLadder(card, s.ladder, s.on_timeout);
    showExtension(card, s.extension);
    if (s.version && s.version.changed) showVersionChange(card, s.version.detail);
    setStatus(card, s.status);
    var p = s.policy || {};
    card.dataset.standing = standing(p);
    showPolicy(card, p.approvals, p.quorum, p.approved_by);
    if (p.edited_args) showArgs(card, p.edited_args);
    if (s.decision) decided(card, s.decision);
    if (summary) {
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
     deadline does: agents.payloads.ladder_payload. */
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
    if (onTimeout) card.dataset.onTimeout = onTimeout;
  }

  /* The reasons offered for a rejection (the tool's reject_reasons), beside free text. */
  function showPresets(card, reasons) {
    var box = card.querySelector(".presets");
    if (!box) return;
    var list = box.querySelector(".preset-list");
    list.replaceChildren();
    reasons.forEach(function (reason) {
      var b = document.createElement("button");
      b.type = "button";
      b.className = "chip";
      b.dataset.action = "preset";
      b.dataset.reason = reason;
      fill(b, reason);
      list.appendChild(b);
    });
    box.hidden = reasons.length === 0;
  }

  /* Which decisions the request takes (agents.policy allow_*): the others are not offered,
     and the server refuses them anyway. */
  function showAllowed(card, allow) {
    var a = allow || { accept: true, edit: true, respond: false, ignore: true };
    ["accept", "edit", "respond", "ignore"].forEach(function (key) {
      card.dataset["allow" + key.charAt(0).toUpperCase() + key.slice(1)] = String(Boolean(a[key]));
    });
    var show = { approve: a.accept, edit: a.edit, respond: a.respond, ignore: a.ignore };
    Object.keys(show).forEach(function (action) {
      card.querySelectorAll("[data-action=" + action + "]").forEach(function (b) { b.hidden = !show[action]; });
    });
    var hint = card.querySelector(".shortcut-respond");
    if (hint) hint.hidden = !a.respond;
  }

  function allows(card, key) {
    return card.dataset["allow" + key.charAt(0).toUpperCase() + key.slice(1)] !== "false";
  }

  /* Dismissed from the inbox without a decision: it stays pending until its deadline. */
  function ignored(card, by) {
    card.classList.add("ignored");
    var line = card.querySelector(".ignored-line");
    fill(line.querySelector(".ignored-by"), (by && by.by) || "someone");
    line.hidden = false;
    card.querySelectorAll("[data-action=ignore]").forEach(function (b) { b.hidden = true; });
    // The inbox's notice in its place copies the outcome line (static/js/inbox.js `leave`).
    fill(card.querySelector(".outcome"), "dismissed by " + ((by && by.by) || "someone") +
      "; still pending until its deadline");
    card.dispatchEvent(new CustomEvent("gateway:ignored", { bubbles: true }));
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
    excerpt(line, outcomeText(outcome), wholeUrl(card));
    line.hidden = false;
    card.querySelectorAll("button:not([data-action=history])").forEach(function (b) { b.disabled = true; });
    card.querySelectorAll(".reject-box, .edit-box, .extend-box, .respond-box, .pending-edit, .ignored-line")
      .forEach(function (box) { box.hidden = true; });
    card.querySelectorAll("textarea, input, select").forEach(function (field) { field.disabled = true; });
    card.querySelector(".what-happens").hidden = true;
    card.classList.remove("editing");
    var countdown = card.querySelector(".countdown");
    if (countdown) countdown.textContent = "";
    var before = original(card);
    if (outcome.modifiedArgs && before && JSON.stringify(outcome.modifiedArgs) !== JSON.stringify(before)) {
      // What ran is the edit: the table shows it beside what the agent asked.
      var ran = card.querySelector(".ran-with");
      diffTable(ran.querySelector("tbody"), schemas[card.dataset.id], before, outcome.modifiedArgs);
      ran.hidden = false;
      card.querySelector(".fields").hidden = true;
      var summary = fillSummary(card.dataset.summaryTemplate, outcome.modifiedArgs);
      if (summary) fill(card.querySelector(".summary"), summary);
    }
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
    if (!on) guardApprove(card);
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
      if ((r.status === 202 || r.status === 200) && body.ignore && r.body.outcome === null) {
        ignored(card, r.body.suspension.ignored);
      } else if (r.status === 202 && r.body.outcome === null) {
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

  /* A server-drawn card has no edit, respond or extend box (templates/approvals/_card.html
     draws them on the skeleton only, to keep a page of cards small): it gets a copy of the
     skeleton's when a reviewer first opens one. [box, where it goes, before it or inside]. */
  var LAZY = [
    [".edit-box", ".only-confirmation .shortcuts", "before"],
    [".respond-box", ".only-confirmation .shortcuts", "before"],
    [".extend-box", ".extend-part", "inside"],
  ];

  function boxes(card) {
    LAZY.forEach(function (lazy) {
      var anchor = card.querySelector(lazy[1]);
      var source = template.content.querySelector(lazy[0]);
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

  /* Editing: a form generated from the tool's schema (or its JSON, for complex schemas),
     a before/after diff reviewed before "Approve edited", and the plain Approve off while an
     edit is pending, so the wrong arguments cannot be approved by accident. */
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

  function same(a, b) {
    return canonical(a) === canonical(b);
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
    return edit.value === null || Object.keys(edit.errors).length > 0 || !same(edit.value, original(card));
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
      var schema = schemas[card.dataset.id] || {};
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
      if (!toJson) window.GatewaySchema.buildForm(form, schemas[card.dataset.id] || {}, edit.value, "f-" + card.dataset.id);
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
    window.GatewaySchema.buildForm(box.querySelector(".schema-form"), schemas[card.dataset.id] || {}, args, "f-" + card.dataset.id);
    fieldErrors(card, box.querySelector(".field-errors"), {});
    unreview(card);
    box.hidden = true;
    card.querySelector("[data-action=edit]").setAttribute("aria-expanded", "false");
    guardApprove(card);
  }

  /* Check the edit (schema.js, then the server again) and show what changes. */
  function reviewEdit(card) {
    var box = card.querySelector(".edit-box");
    var list = box.querySelector(".field-errors");
    var edit = currentEdit(card);
    var errors = edit.errors;
    if (edit.value !== null && !Object.keys(errors).length) {
      errors = window.GatewaySchema.validate(schemas[card.dataset.id] || {}, edit.value);
    }
    var left = jsonMode(card) ? errors : window.GatewaySchema.showFormErrors(box.querySelector(".schema-form"), errors);
    fieldErrors(card, list, left);
    if (Object.keys(errors).length) {
      unreview(card);
      var bad = box.querySelector("[aria-invalid=true]");
      if (bad) bad.focus();
      return null;
    }
    var before = original(card);
    var changed = diffTable(box.querySelector(".edit-diff tbody"), schemas[card.dataset.id], before, edit.value);
    var template = card.dataset.summaryTemplate;
    var line = box.querySelector(".diff-summary");
    if (!changed) {
      fill(line, "Nothing changed: use Approve, or edit a field.");
    } else if (template) {
      fill(line, fillSummary(template, before) + "  →  " + fillSummary(template, edit.value));
    } else {
      fill(line, changed + (changed === 1 ? " field changes." : " fields change."));
    }
    box.querySelector(".edit-diff").hidden = false;
    box.querySelector("[data-action=approve-edited]").hidden = !changed;
    box.querySelector("[data-action=review-edit]").hidden = Boolean(changed);
    card.dataset.reviewed = canonical(edit.value);
    if (changed) box.querySelector("[data-action=approve-edited]").focus();
    return edit.value;
  }

  function approveEdited(card) {
    var edit = currentEdit(card);
    if (edit.value === null || card.dataset.reviewed !== canonical(edit.value)) {
      reviewEdit(card);  // changed since the review: show the diff again first
      return;
    }
    var list = card.querySelector(".edit-box .field-errors");
    send(card, { approved: true, modifiedArgs: edit.value }, list);
  }

  function openReject(card, button) {
    toggle(card, button, ".reject-box");
  }

  /* The thread's recent history, on demand: its last conversation events (GET /api/events,
     paged by `after`), as text. */
  var HISTORY_TYPES = ["THREAD_STARTED", "USER_MESSAGE", "AGENT_MESSAGE", "TOOL_CALLED", "TOOL_RESULT",
                       "SUSPENSION_DECIDED"];
  var HISTORY_SHOWN = 8;

  function historyLine(e) {
    var p = e.payload || {};
    if (e.type === "THREAD_STARTED") return [e.actor || "user", p.message || ""];
    if (e.type === "USER_MESSAGE") return [e.actor || "user", p.text || ""];
    if (e.type === "AGENT_MESSAGE") return [p.agent || p.frame || "agent", p.text || ""];
    if (e.type === "TOOL_CALLED") return [p.agent || p.frame || "agent", "calls " + p.tool + " " + JSON.stringify(p.input)];
    if (e.type === "TOOL_RESULT") return [p.tool || "tool", (p.is_error ? "error: " : "result: ") + String(p.content || "")];
    return [e.actor || p.decided_by || "", outcomeText(p) + " " + (p.tool || "")];
  }

  function loadHistory(card, after, found, pages) {
    var url = "/api/events?limit=200&thread=" + encodeURIComponent(card.dataset.thread) + "&after=" + after;
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (body) {
        body.events.forEach(function (e) { if (HISTORY_TYPES.indexOf(e.type) !== -1) found.push(e); });
        found = found.slice(-HISTORY_SHOWN);
        if (body.events.length === 200 && pages < 25) return loadHistory(card, body.last_id, found, pages + 1);
        return found;
      });
  }

  function showHistory(card, button) {
    var box = card.querySelector(".history");
    box.hidden = !box.hidden;
    button.setAttribute("aria-expanded", String(!box.hidden));
    if (box.hidden) return;
    var list = box.querySelector(".history-list");
    var note = box.querySelector(".history-note");
    fill(note, "Loading…");
    note.hidden = false;
    loadHistory(card, 0, [], 0).then(function (found) {
      list.replaceChildren();
      found.forEach(function (e) {
        var li = document.createElement("li");
        li.className = "history-" + e.type.toLowerCase();
        var who = document.createElement("span");
        who.className = "who";
        var line = historyLine(e);
        fill(who, line[0]);
        var text = document.createElement("span");
        text.className = "text";
        excerpt(text, line[1], "/api/events/" + encodeURIComponent(e.id));
        li.appendChild(who);
        li.appendChild(text);
        list.appendChild(li);
      });
      fill(note, found.length ? "" : "Nothing said yet.");
      note.hidden = Boolean(found.length);
    }, function () {
      fill(note, "The history could not be loaded. Open the thread instead.");
    });
  }

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
      openReject(card, button);
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
      var said = respondBox.querySelector("textarea").value;
      if (!said.trim()) {
        fieldErrors(card, respondBox.querySelector(".field-errors"), { "": "Write a response first." });
        return;
      }
      send(card, { response: said }, respondBox.querySelector(".field-errors"));
    } else if (action === "ignore") {
      send(card, { ignore: true });
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

  /* Typing in the editor keeps Approve off and the review current. */
  document.addEventListener("input", function (event) {
    var box = event.target.closest && event.target.closest(".edit-box");
    if (!box) return;
    var card = box.closest(".card");
    if (card.dataset.reviewed !== undefined) unreview(card);
    guardApprove(card);
  });
  document.addEventListener("change", function (event) {
    var box = event.target.closest && event.target.closest(".edit-box");
    if (!box) return;
    var card = box.closest(".card");
    if (card.dataset.reviewed !== undefined) unreview(card);
    guardApprove(card);
  });

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
    if (action === "approve" || action === "ignore") return;
    if (action === "history") button.focus();
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
    } else if (message.type === "SUSPENSION_IGNORED") {
      if (card.dataset.status === "pending") ignored(card, { by: p.by });
    } else if (message.type === "SUSPENSION_EXTENDED") {
      if (card.dataset.status !== "pending") return;
      moveDeadline(card, p.expires_at);
      showLadder(card, p.ladder);
      showExtension(card, { by: p.by, seconds: p.seconds, reason: p.reason });
    }
  }

  /* "Rejects automatically at 09:11" in the reader's time zone, and the time left. */
  function showDeadline(card) {
    var when = card.querySelector(".deadline-time");
    if (!when) return;
    var action = card.querySelector(".deadline-action");
    fill(action, (card.dataset.onTimeout === "approve" ? "Approves" : "Rejects") + " automatically");
    var at = card.dataset.expires ? new Date(card.dataset.expires) : null;
    card.querySelector(".deadline").hidden = !at || isNaN(at);
    if (!at || isNaN(at)) return;
    when.setAttribute("datetime", card.dataset.expires);
    var today = at.toDateString() === new Date().toDateString();
    var time = at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    when.textContent = (today ? "" : at.toLocaleDateString([], { day: "numeric", month: "short" }) + " ") + time;
    when.title = at.toLocaleString([], { timeZoneName: "short" });
  }

  function tick(card) {
    var countdown = card.querySelector(".countdown");
    if (!countdown || card.dataset.status !== "pending" || !card.dataset.expires) return;
    if (card.querySelector(".deadline-time").getAttribute("datetime") !== card.dataset.expires) showDeadline(card);
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
    showDeadline(card);
    tick(card);
  });

  window.GatewayCards = { build: build, byId: byId, applyEvent: applyEvent, schemas: schemas };
})();

/* The thread page: its transcript, status and stack follow the thread's events live; a model's
   text grows in a bubble while it is written (LIVE_TEXT); agents called as tools (instances)
   each have a line in the batch panel, and their own chat is folded under the line that
   started them; the tokens the thread used are summed per agent. */
(function () {
  "use strict";

  var live = window.GatewayLive;
  var fill = window.GatewayText.fill;
  var cards = window.GatewayCards;
  var thread = live.data.thread;
  var transcript = document.getElementById("transcript");
  var stack = document.getElementById("stack");
  var badge = document.getElementById("thread-status");
  var messageForm = document.getElementById("message-form");
  var cancel = document.getElementById("cancel");
  var entryTemplate = document.getElementById("entry-template");
  var laneTemplate = document.getElementById("lane-template");
  var bubbleTemplate = document.getElementById("bubble-template");
  var instanceTemplate = document.getElementById("instance-template");
  var liveText = document.getElementById("live-text");
  var batch = document.getElementById("batch");
  var instanceList = document.getElementById("instances");
  var usageBox = document.getElementById("usage");
  var FINISHED = ["completed", "failed", "cancelled"];
  var INSTANCE_ENDED = ["done", "failed", "cancelled"];
  var DECIDED = ["SUSPENSION_DECIDED", "SUSPENSION_TIMEOUT", "SUSPENSION_CANCELLED"];
  // An instance's own chat, folded under its line; approvals.transcript FOLDED mirrors this.
  var FOLDED = ["AGENT_MESSAGE", "TOOL_CALLED", "TOOL_RESULT", "AGENT_RESUMED", "FRAME_PUSHED", "FRAME_POPPED"];
  // Events after which the thread's instances and usage are read again (at most once a second).
  var REREAD = ["AGENT_MESSAGE", "TOOL_RESULT", "AGENT_SUSPENDED", "INSTANCE_STARTED",
                "INSTANCE_FINISHED", "THREAD_WAITING", "THREAD_COMPLETED", "THREAD_FAILED",
                "THREAD_CANCELLED"];
  var STATUS_AFTER = {
    THREAD_STARTED: "running",
    USER_MESSAGE: "running",
    AGENT_RESUMED: "running",
    AGENT_SUSPENDED: "suspended",
    THREAD_WAITING: "waiting_input",
    THREAD_SUSPENDED: "suspended",
    THREAD_RESUMED: "running",
    THREAD_COMPLETED: "completed",
    THREAD_FAILED: "failed",
    THREAD_CANCELLED: "cancelled",
  };

  function pretty(value) {
    return JSON.stringify(value, null, 2);
  }

  /* Mirrors approvals.transcript.seconds. */
  function seconds(ms) {
    return typeof ms === "number" ? (ms / 1000).toFixed(1) + " s" : "?";
  }

  function number(n) {
    return Number(n || 0).toLocaleString("en-US");
  }

  /* Mirrors approvals.transcript.describe: who said what, for one transcript line. */
  function describe(type, p, actor) {
    switch (type) {
      case "THREAD_STARTED":
      case "USER_MESSAGE":
        return { tone: "user", who: actor || "user", text: p.message || p.text || "" };
      case "AGENT_MESSAGE":
        return { tone: "agent", who: p.frame || "", text: p.text || "" };
      case "THREAD_WAITING":
        return { tone: "system", who: p.frame || "", text: "waits for your reply" };
      case "THREAD_SUSPENDED":
        return { tone: "system", who: "thread", text: "every agent instance waits for a person" };
      case "THREAD_RESUMED":
        return { tone: "system", who: "thread", text: "an agent instance works again" };
      case "TOOL_CALLED":
        return { tone: "tool", who: p.frame || "", text: "calls " + (p.tool || ""), pre: pretty(p.input) };
      case "TOOL_RESULT":
        return {
          tone: p.is_error ? "error" : "result", who: p.tool || "",
          text: p.is_error ? "error" : "result", pre: String(p.content === undefined ? "" : p.content),
        };
      case "AGENT_SUSPENDED":
        return {
          tone: "decision", who: (p.presentation && p.presentation.asker) || p.agent || "",
          text: "waits for " + (p.kind === "input" ? "an answer" : "a decision"),
        };
      case "SUSPENSION_DECIDED": {
        var text;
        if (p.status === "responded") {
          text = "answered instead of deciding " + (p.tool || "") + ": " + p.response;
        } else if (p.response !== null && p.response !== undefined) {
          text = "answered: " + p.response;
        } else {
          text = (p.status || "") + " " + (p.tool || "") + (p.reason ? ": " + p.reason : "");
        }
        return {
          tone: "decision", who: actor || p.decided_by || "", text: text,
          pre: p.modifiedArgs !== null && p.modifiedArgs !== undefined ? pretty(p.modifiedArgs) : "",
        };
      }
      case "SUSPENSION_IGNORED":
        return {
          tone: "system", who: actor || p.by || "",
          text: "dismissed " + (p.tool || "") + " from the inbox; its deadline still applies",
        };
      case "SUSPENSION_VOTED":
        return {
          tone: "decision", who: actor || p.by || "",
          text: "approved " + (p.tool || "") + " (" + p.approvals + " of " + p.required + " approvals)",
          pre: p.edited_args !== null && p.edited_args !== undefined ? pretty(p.edited_args) : "",
        };
      case "SUSPENSION_TIMEOUT":
        return {
          tone: "decision", who: "deadline",
          text: (p.tool || "") + " " + (p.approved ? "approved" : "rejected") + " automatically",
        };
      case "SUSPENSION_CANCELLED":
        return { tone: "decision", who: actor || "", text: (p.tool || "") + " cancelled" };
      case "AGENT_RESUMED":
        return { tone: "system", who: p.frame || "", text: "resumed after " + (p.tool || "") };
      case "FRAME_PUSHED":
        return { tone: "system", who: "stack", text: (p.frame || "") + " started" };
      case "FRAME_POPPED":
        return {
          tone: "system", who: "stack", text: (p.frame || "") + " returned to " + (p.to || ""),
          pre: String(p.result || ""),
        };
      case "THREAD_COMPLETED":
        return { tone: "end", who: "thread", text: "completed", pre: String(p.result || "") };
      case "THREAD_FAILED":
        return { tone: "error", who: "thread", text: "failed", pre: String(p.error || "") };
      case "THREAD_CANCELLED":
        return { tone: "end", who: actor || "thread", text: "cancelled the run" };
      case "INSTANCE_STARTED":
        return { tone: "system", who: p.parent_frame || "", text: "started " + (p.instance || "") };
      case "INSTANCE_FINISHED":
        return {
          tone: p.status === "done" && !p.is_error ? "result" : "error", who: p.instance || "",
          text: (p.status || "") + " in " + seconds(p.duration_ms), pre: String(p.result || ""),
        };
      case "INPUT_TIMEOUT":
        return {
          tone: "system", who: p.frame || "thread",
          text: p.on_timeout === "continue" ? "no reply in time: the agent was told"
            : "no reply in time: the run is cancelled",
        };
      case "SUSPENSION_REMINDER":
        return { tone: "system", who: p.agent || "", text: "reminder: " + (p.tool || "") };
      case "SUSPENSION_ESCALATED":
        return {
          tone: "system", who: p.agent || "",
          text: "escalated " + (p.tool || "") + " to " + (p.escalate_to || ""),
        };
      case "SUSPENSION_EXTENDED":
        return {
          tone: "system", who: actor || p.by || "",
          text: "extended the deadline of " + (p.tool || ""), pre: String(p.reason || ""),
        };
      default:
        return { tone: "system", who: "", text: type };
    }
  }

  /* Mirrors approvals.transcript.HIDDEN: events another line already says. */
  var HIDDEN = ["INPUT_REQUIRED", "INPUT_PROVIDED"];
  /* Tool calls shown by their card (approvals.views.thread_page): no line of their own. */
  var onCards = {};
  (live.data.on_cards || []).forEach(function (id) { onCards[id] = true; });

  function shownByCard(message) {
    var p = message.payload || {};
    if (message.type === "AGENT_SUSPENDED" && p.tool_use_id) {
      onCards[p.tool_use_id] = true;
      transcript.querySelectorAll("li[data-tool-use]").forEach(function (li) {
        if (li.dataset.toolUse === p.tool_use_id) li.remove();
      });
    }
    return message.type === "TOOL_CALLED" && Boolean(onCards[p.tool_use_id]);
  }

  /* The server writes times in UTC; the reader sees their own clock, for old and new lines. */
  function localTime(time) {
    time.textContent = new Date(time.dateTime).toTimeString().slice(0, 8);
  }

  function entry(message) {
    var li = entryTemplate.content.firstElementChild.cloneNode(true);
    var d = describe(message.type, message.payload || {}, message.actor);
    li.dataset.event = String(message.id);
    li.classList.add("tone-" + d.tone);
    fill(li.querySelector(".who"), d.who);
    var p = message.payload || {};
    if (FOLDED.indexOf(message.type) !== -1 && typeof p.lane === "number") li.dataset.lane = String(p.lane);
    if (message.type === "INSTANCE_STARTED" && typeof p.frame_id === "number") {
      li.dataset.instance = String(p.frame_id);
    }
    if (message.type === "TOOL_CALLED" && p.tool_use_id) li.dataset.toolUse = p.tool_use_id;
    var time = li.querySelector("time");
    time.dateTime = message.created_at;
    localTime(time);
    if (message.type === "AGENT_SUSPENDED" && !cards.byId(message.payload.id)) {
      // Its prompt is the agent's message just above (approvals.transcript.transcript_entry).
      if (typeof p.lane !== "number") li.classList.add("said-above");
      li.appendChild(cards.build(message.payload, message.truncated));
      return li;
    }
    // Cut at the value limit, whole at the event's URL (approvals/templatetags/excerpts.py).
    var url = "/api/events/" + encodeURIComponent(message.id);
    if (d.text) {
      var p = document.createElement("p");
      p.className = "text";
      window.GatewayText.excerpt(p, d.text, url);
      li.appendChild(p);
    }
    if (d.pre) {
      var pre = document.createElement("pre");
      pre.className = "pre";
      window.GatewayText.excerpt(pre, d.pre, url);
      li.appendChild(pre);
    }
    return li;
  }

  function setStatus(status) {
    badge.textContent = status.replace("_", " ");
    badge.dataset.status = status;
    document.body.dataset.status = status;
    if (messageForm) messageForm.hidden = status !== "waiting_input";
    var finished = FINISHED.indexOf(status) !== -1;
    if (cancel) cancel.hidden = finished;
    if (finished) stack.replaceChildren();
  }

  function follow(message) {
    var p = message.payload || {};
    if (typeof p.lane === "number") return;  // an instance's frames are not the main stack
    if (message.type === "FRAME_PUSHED") {
      var li = document.createElement("li");
      li.dataset.frame = p.frame || "";
      fill(li, p.frame || "");
      stack.appendChild(li);
    } else if (message.type === "FRAME_POPPED" && stack.lastElementChild &&
               (stack.lastElementChild.dataset.frame || stack.lastElementChild.textContent) === p.frame) {
      stack.lastElementChild.remove();
    }
  }

  /* Folding ---------------------------------------------------------------------------- */

  /* The folded chat of instance `lane`, made in its INSTANCE_STARTED line; null without one. */
  function laneBox(lane) {
    var line = transcript.querySelector('li[data-instance="' + lane + '"]');
    if (!line) return null;
    var box = line.querySelector(":scope > details.lane");
    if (!box) {
      box = laneTemplate.content.firstElementChild.cloneNode(true);
      box.dataset.lane = String(lane);
      var known = instances[lane];
      fill(box.querySelector(".lane-name"), known && known.name ? known.name : line.querySelector(".who").textContent);
      line.appendChild(box);
    }
    return box;
  }

  /* Put a transcript line where it belongs: in its instance's folded chat, or at the end. */
  function place(li) {
    var box = li.dataset.lane ? laneBox(li.dataset.lane) : null;
    if (!box) {
      transcript.appendChild(li);
      return;
    }
    var entries = box.querySelector(".lane-entries");
    entries.appendChild(li);
    fill(box.querySelector(".lane-count"), "(" + entries.children.length + ")");
  }

  /* Live text ------------------------------------------------------------------------- */

  var bubbles = {};  // frame id -> {li, seq, lane}
  var stored = {};   // frame id -> text of its last AGENT_MESSAGE, until its live text restarts

  function dropBubble(frame) {
    var bubble = bubbles[frame];
    if (!bubble) return;
    bubble.li.remove();
    delete bubbles[frame];
    if (bubble.lane !== null && instances[bubble.lane]) {
      instances[bubble.lane].activity = "";
      drawInstance(instances[bubble.lane]);
    }
  }

  function showBubble(bubble) {
    var text = bubble.text;
    var said = stored[bubble.frame];
    // The stored message shows this text already (the reset that follows it is on its way).
    if (said !== undefined && text && (bubble.cut ? said.indexOf(text) !== -1 : said.indexOf(text) === 0)) {
      text = "";
    }
    var li = bubble.li;
    fill(li.querySelector(".text"), (bubble.cut && text ? "… " : "") + text);
    li.querySelector(".text").hidden = !text;
    li.querySelector(".writing").hidden = !text;
    fill(li.querySelector(".activity"), bubble.activity);
    li.querySelector(".activity").hidden = !bubble.activity;
    li.hidden = !text && !bubble.activity;
    if (bubble.lane !== null && instances[bubble.lane]) {
      instances[bubble.lane].activity = bubble.activity || (text ? "writing…" : "");
      drawInstance(instances[bubble.lane]);
    }
  }

  function applyText(m) {
    if (m.thread !== thread || typeof m.frame_id !== "number") return;
    if (m.done) {
      dropBubble(m.frame_id);
      return;
    }
    var bubble = bubbles[m.frame_id];
    if (bubble && m.seq <= bubble.seq) return;
    if (!bubble) {
      var lane = typeof m.lane === "number" ? m.lane : null;
      var li = bubbleTemplate.content.firstElementChild.cloneNode(true);
      li.dataset.frame = String(m.frame_id);
      fill(li.querySelector(".who"), m.frame || "");
      var box = lane !== null ? laneBox(lane) : null;
      (box ? box.querySelector(".lane-live") : liveText).appendChild(li);
      bubble = bubbles[m.frame_id] = { li: li, frame: m.frame_id, lane: lane, seq: 0 };
    }
    bubble.seq = m.seq;
    bubble.text = m.text || "";
    bubble.cut = m.cut || 0;
    bubble.activity = m.activity || "";
    if (!bubble.text) delete stored[m.frame_id];  // a new answer starts
    showBubble(bubble);
  }

  /* The stored message of a frame replaces its live text. */
  function messageStored(p) {
    var bubble = bubbles[p.frame_id];
    // No text shown, or its reset came first: nothing to replace, and the next answer's text
    // must not be taken for this one's.
    if (!bubble || !bubble.text) return;
    stored[p.frame_id] = String(p.text || "");
    showBubble(bubble);
  }

  function dropAllBubbles() {
    Object.keys(bubbles).forEach(dropBubble);
  }

  /* Instances ------------------------------------------------------------------------- */

  /* What the page knows of each instance, merged from snapshots (the page's, then the REST
     API's) and events in whatever order they come: an end is final, tools and tokens only
     grow, and a suspension waits until its decision is seen. */
  var instances = {};  // frame id -> record
  var decided = {};    // suspension id -> true
  var used = {};       // tool_use id -> true, for tools counted from events

  function instance(id) {
    var r = instances[id];
    if (!r) {
      r = instances[id] = {
        id: id, name: "", started: null, ended: null, durationMs: null,
        pending: {}, tools: [], eventTools: [], input: 0, output: 0, activity: "", li: null,
      };
    }
    return r;
  }

  function status(r) {
    if (r.ended) return r.ended;
    for (var sid in r.pending) {
      if (!decided[sid]) return "waiting for approval";
    }
    return "running";
  }

  function elapsed(r) {
    if (r.durationMs !== null) return seconds(r.durationMs);
    if (!r.started) return "";
    return Math.max(0, Math.floor((Date.now() - Date.parse(r.started)) / 1000)) + " s";
  }

  function drawInstance(r) {
    if (!r.li) {
      r.li = instanceTemplate.content.firstElementChild.cloneNode(true);
      r.li.dataset.frame = String(r.id);
      var after = null;
      instanceList.querySelectorAll("li.instance").forEach(function (li) {
        if (after === null && Number(li.dataset.frame) > r.id) after = li;
      });
      instanceList.insertBefore(r.li, after);  // oldest first, as frames are numbered
      batch.hidden = false;
    }
    var state = status(r);
    fill(r.li.querySelector(".name"), r.name || "instance " + r.id);
    var badge = r.li.querySelector(".state");
    badge.textContent = state;
    r.li.dataset.status = state === "waiting for approval" ? "waiting" : state;
    fill(r.li.querySelector(".duration"), elapsed(r));
    var tools = r.eventTools.length > r.tools.length ? r.eventTools : r.tools;
    fill(r.li.querySelector(".tools"), tools.length ? "used " + tools.join(", ") : "");
    var tokens = r.input + r.output;
    fill(r.li.querySelector(".tokens"), tokens ? number(tokens) + " tokens" : "");
    var doing = r.ended || r.activity === state ? "" : r.activity;
    fill(r.li.querySelector(".activity"), doing);
    r.li.querySelector(".activity").hidden = !doing;
    var box = transcript.querySelector('details.lane[data-lane="' + r.id + '"] .lane-name');
    if (box && r.name) fill(box, r.name);
  }

  function mergeInstances(rows) {
    (rows || []).forEach(function (row) {
      var r = instance(row.id);
      r.name = row.name || r.name;
      r.started = r.started || row.started_at;
      if (INSTANCE_ENDED.indexOf(row.status) !== -1 && !r.ended) {
        r.ended = row.status;
        r.durationMs = row.duration_ms;
      }
      (row.pending_suspensions || []).forEach(function (sid) { r.pending[sid] = true; });
      if ((row.tools || []).length > r.tools.length) r.tools = row.tools;
      r.input = Math.max(r.input, row.input_tokens || 0);
      r.output = Math.max(r.output, row.output_tokens || 0);
      drawInstance(r);
    });
  }

  function followInstances(message) {
    var p = message.payload || {};
    var r;
    if (message.type === "INSTANCE_STARTED" && typeof p.frame_id === "number") {
      r = instance(p.frame_id);
      r.name = p.instance || r.name;
      r.started = r.started || p.started_at;
      drawInstance(r);
    } else if (message.type === "INSTANCE_FINISHED" && typeof p.frame_id === "number") {
      r = instance(p.frame_id);
      r.name = p.instance || r.name;
      r.started = r.started || p.started_at;
      r.ended = p.status || "done";
      r.durationMs = typeof p.duration_ms === "number" ? p.duration_ms : null;
      if (Array.isArray(p.tools) && p.tools.length >= r.tools.length) r.tools = p.tools;
      var usage = p.usage || {};
      r.input = Math.max(r.input, usage.input_tokens || 0);
      r.output = Math.max(r.output, usage.output_tokens || 0);
      drawInstance(r);
    } else if (message.type === "TOOL_CALLED" && typeof p.lane === "number" && p.frame_id === p.lane) {
      if (p.tool_use_id && used[p.tool_use_id]) return;
      used[p.tool_use_id] = true;
      r = instance(p.lane);
      r.eventTools.push(p.tool || "");
      drawInstance(r);
    } else if (message.type === "AGENT_SUSPENDED" && typeof p.lane === "number") {
      r = instance(p.lane);
      r.pending[message.suspension || p.id] = true;
      drawInstance(r);
    } else if (DECIDED.indexOf(message.type) !== -1 && message.suspension) {
      decided[message.suspension] = true;
      Object.keys(instances).forEach(function (id) {
        if (instances[id].pending[message.suspension]) drawInstance(instances[id]);
      });
    }
  }

  setInterval(function () {
    Object.keys(instances).forEach(function (id) {
      if (!instances[id].ended) fill(instances[id].li.querySelector(".duration"), elapsed(instances[id]));
    });
  }, 1000);

  /* Usage ----------------------------------------------------------------------------- */

  var usage = { input_tokens: 0, output_tokens: 0, by_agent: {} };

  function mergeUsage(u) {
    if (!u) return;
    usage.input_tokens = Math.max(usage.input_tokens, u.input_tokens || 0);
    usage.output_tokens = Math.max(usage.output_tokens, u.output_tokens || 0);
    Object.keys(u.by_agent || {}).forEach(function (name) {
      var mine = usage.by_agent[name] || { input_tokens: 0, output_tokens: 0 };
      mine.input_tokens = Math.max(mine.input_tokens, u.by_agent[name].input_tokens || 0);
      mine.output_tokens = Math.max(mine.output_tokens, u.by_agent[name].output_tokens || 0);
      usage.by_agent[name] = mine;
    });
    var total = usage.input_tokens + usage.output_tokens;
    usageBox.hidden = !total;
    fill(usageBox.querySelector(".total"), number(total));
    fill(usageBox.querySelector(".split"), number(usage.input_tokens) + " in · " + number(usage.output_tokens) + " out");
    var list = usageBox.querySelector(".usage-agents");
    var names = Object.keys(usage.by_agent).sort();
    list.replaceChildren.apply(list, names.map(function (name) {
      var li = document.createElement("li");
      var mine = usage.by_agent[name];
      li.dataset.agent = name;
      fill(li, name + " " + number(mine.input_tokens + mine.output_tokens));
      li.title = number(mine.input_tokens) + " in · " + number(mine.output_tokens) + " out";
      return li;
    }));
  }

  var rereadTimer = null;
  var lastReread = 0;

  /* Read the thread's instances and usage again, at most once a second. */
  function reread() {
    if (rereadTimer !== null) return;
    var wait = Math.max(0, lastReread + 1000 - Date.now());
    rereadTimer = setTimeout(function () {
      lastReread = Date.now();
      fetch("/api/threads/" + encodeURIComponent(thread), {
        credentials: "same-origin", headers: { Accept: "application/json" },
      }).then(function (response) { return response.ok ? response.json() : null; })
        .then(function (body) {
          rereadTimer = null;
          if (!body) return;
          mergeInstances(body.instances);
          mergeUsage(body.usage);
        }, function () { rereadTimer = null; });
    }, wait);
  }

  /* Events ---------------------------------------------------------------------------- */

  live.on(function (message) {
    if (message.thread !== thread) return;
    cards.applyEvent(message);
    followInstances(message);
    if (message.type === "AGENT_MESSAGE") messageStored(message.payload || {});
    if (REREAD.indexOf(message.type) !== -1) reread();
    // Events the server already rendered come again when the page's cursor lagged behind.
    if (transcript.querySelector('[data-event="' + message.id + '"]')) return;
    if (HIDDEN.indexOf(message.type) !== -1 || shownByCard(message)) return;
    place(entry(message));
    follow(message);
    var inLane = message.payload && message.payload.lane !== null && message.payload.lane !== undefined;
    if (STATUS_AFTER[message.type] && !inLane) setStatus(STATUS_AFTER[message.type]);
    if (FINISHED.indexOf(STATUS_AFTER[message.type]) !== -1) dropAllBubbles();
  });
  live.onText(applyText);
  live.onOpen(dropAllBubbles);  // the new socket sends what is being written now

  function notice(p, text) {
    p.textContent = text;
    p.hidden = !text;
  }

  if (messageForm) {
    messageForm.addEventListener("submit", function (event) {
      event.preventDefault();
      var field = messageForm.querySelector("textarea");
      var said = messageForm.querySelector(".notice");
      live.post("/api/threads/" + encodeURIComponent(thread) + "/messages", { text: field.value })
        .then(function (r) {
          if (r.status === 202) {
            field.value = "";
            notice(said, "");
          } else {
            notice(said, r.body.detail || "The server answered " + r.status + ".");
          }
        }, function () { notice(said, "The server could not be reached. Try again."); });
    });
  }

  if (cancel) {
    var armed = false;
    cancel.addEventListener("click", function () {
      var said = document.getElementById("cancel-notice");
      if (!armed) {
        armed = true;
        cancel.textContent = "Really cancel the run?";
        return;
      }
      live.post("/api/threads/" + encodeURIComponent(thread) + "/cancel").then(function (r) {
        if (r.status !== 200) notice(said, r.body.detail || "The server answered " + r.status + ".");
      }, function () { notice(said, "The server could not be reached. Try again."); });
    });
  }

  // The transcript's own times; a card writes its deadline and ladder itself (cards.js).
  transcript.querySelectorAll("time[datetime]").forEach(function (t) {
    if (!t.closest(".card")) localTime(t);
  });
  mergeInstances(live.data.instances);
  mergeUsage(live.data.usage);
  transcript.querySelectorAll(":scope > li[data-lane]").forEach(place);
  live.start();
})();

/* The thread page: its transcript, status and stack follow the thread's events live. */
(function () {
  "use strict";

  var live = window.GatewayLive;
  var cards = window.GatewayCards;
  var thread = live.data.thread;
  var transcript = document.getElementById("transcript");
  var stack = document.getElementById("stack");
  var badge = document.getElementById("thread-status");
  var messageForm = document.getElementById("message-form");
  var cancel = document.getElementById("cancel");
  var entryTemplate = document.getElementById("entry-template");
  var FINISHED = ["completed", "failed", "cancelled"];
  var STATUS_AFTER = {
    THREAD_STARTED: "running",
    USER_MESSAGE: "running",
    AGENT_RESUMED: "running",
    AGENT_SUSPENDED: "suspended",
    THREAD_WAITING: "waiting_input",
    THREAD_COMPLETED: "completed",
    THREAD_FAILED: "failed",
    THREAD_CANCELLED: "cancelled",
  };

  function pretty(value) {
    return JSON.stringify(value, null, 2);
  }

  /* Mirrors approvals.views.describe: who said what, for one transcript line. */
  function describe(type, p, actor) {
    switch (type) {
      case "THREAD_STARTED":
      case "USER_MESSAGE":
        return { tone: "user", who: actor || "user", text: p.message || p.text || "" };
      case "AGENT_MESSAGE":
        return { tone: "agent", who: p.frame || "", text: p.text || "" };
      case "THREAD_WAITING":
        return { tone: "system", who: p.frame || "", text: "waits for your reply" };
      case "TOOL_CALLED":
        return { tone: "tool", who: p.frame || "", text: "calls " + (p.tool || ""), pre: pretty(p.input) };
      case "TOOL_RESULT":
        return {
          tone: p.is_error ? "error" : "result", who: p.tool || "",
          text: p.is_error ? "error" : "result", pre: String(p.content === undefined ? "" : p.content),
        };
      case "AGENT_SUSPENDED":
        return {
          tone: "decision", who: p.lineage || p.agent || "",
          text: "waits for " + (p.kind === "input" ? "an answer" : "a decision"),
        };
      case "SUSPENSION_DECIDED": {
        var text;
        if (p.response !== null && p.response !== undefined) {
          text = "answered: " + p.response;
        } else {
          text = (p.status || "") + " " + (p.tool || "") + (p.reason ? ": " + p.reason : "");
        }
        return {
          tone: "decision", who: actor || "", text: text,
          pre: p.modifiedArgs !== null && p.modifiedArgs !== undefined ? pretty(p.modifiedArgs) : "",
        };
      }
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
      default:
        return { tone: "system", who: "", text: type };
    }
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
    li.querySelector(".who").textContent = d.who;
    var time = li.querySelector("time");
    time.dateTime = message.created_at;
    localTime(time);
    if (message.type === "AGENT_SUSPENDED" && !cards.byId(message.payload.id)) {
      li.appendChild(cards.build(message.payload));
      return li;
    }
    if (d.text) {
      var p = document.createElement("p");
      p.className = "text";
      p.textContent = d.text;
      li.appendChild(p);
    }
    if (d.pre) {
      var pre = document.createElement("pre");
      pre.className = "pre";
      pre.textContent = d.pre;
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
    if (message.type === "FRAME_PUSHED") {
      var li = document.createElement("li");
      li.textContent = p.frame || "";
      stack.appendChild(li);
    } else if (message.type === "FRAME_POPPED" && stack.lastElementChild &&
               stack.lastElementChild.textContent === p.frame) {
      stack.lastElementChild.remove();
    }
  }

  live.on(function (message) {
    if (message.thread !== thread) return;
    cards.applyEvent(message);
    // Events the server already rendered come again when the page's cursor lagged behind.
    if (transcript.querySelector('[data-event="' + message.id + '"]')) return;
    transcript.appendChild(entry(message));
    follow(message);
    if (STATUS_AFTER[message.type]) setStatus(STATUS_AFTER[message.type]);
  });

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

  transcript.querySelectorAll("time[datetime]").forEach(localTime);
  live.start();
})();

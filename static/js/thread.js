/* The thread page. Its transcript lines, cards, status, stack, batch panel and token usage are
   rendered by the server only: when the socket brings an event of the thread, the page asks for
   the lines of the events it brought (/fragments/threads/<id>/entries?ids=...), then the status
   and stack, and the batch panel, and puts them in place. A model's text grows in a bubble
   while it is written (LIVE_TEXT, no event yet); an instance's own chat is folded under the
   line that started it. */
(function () {
  "use strict";

  var live = window.GatewayLive;
  var swap = window.GatewaySwap;
  var cards = window.GatewayCards;
  var fill = window.GatewayText.fill;
  var thread = live.data.thread;
  var base = "/fragments/threads/" + encodeURIComponent(thread) + "/";
  var transcript = document.getElementById("transcript");
  var messageForm = document.getElementById("message-form");
  var cancel = document.getElementById("cancel");
  var bubbleTemplate = document.getElementById("bubble-template");
  var liveText = document.getElementById("live-text");
  // Events after which the batch panel and the usage are asked for again (at most once a second).
  var REREAD = ["AGENT_MESSAGE", "TOOL_CALLED", "TOOL_RESULT", "AGENT_SUSPENDED", "INSTANCE_STARTED",
                "INSTANCE_FINISHED", "SUSPENSION_DECIDED", "SUSPENSION_TIMEOUT", "SUSPENSION_CANCELLED",
                "THREAD_WAITING", "THREAD_COMPLETED", "THREAD_FAILED", "THREAD_CANCELLED"];

  /* The server writes times in UTC; the reader sees their own clock, for old and new lines. */
  function localTime(time) {
    time.textContent = new Date(time.dateTime).toTimeString().slice(0, 8);
  }

  /* Folding ---------------------------------------------------------------------------- */

  /* The folded chat of instance `lane`, in its INSTANCE_STARTED line; null without one. */
  function laneBox(lane) {
    return transcript.querySelector('li[data-instance="' + lane + '"] > details.lane');
  }

  function count(box) {
    box.querySelector(".lane-count").textContent = "(" + box.querySelector(".lane-entries").children.length + ")";
  }

  /* Put a transcript line where it belongs: in its instance's folded chat, or in id order. */
  function place(li) {
    var box = li.dataset.lane ? laneBox(li.dataset.lane) : null;
    var list = box ? box.querySelector(".lane-entries") : transcript;
    var id = Number(li.dataset.event);
    var next = null;
    var lines = list.querySelectorAll(":scope > li[data-event]");
    for (var i = lines.length - 1; i >= 0 && Number(lines[i].dataset.event) > id; i -= 1) next = lines[i];
    list.insertBefore(li, next);
    if (box) count(box);
  }

  /* Lines ------------------------------------------------------------------------------- */

  var asked = [];  // ids of the thread's events whose lines are to be asked for
  var tries = 0;

  /* The lines of the events asked for, each put in place once (a replayed event's line is on
     the page already); a line of a call goes when its card comes. */
  function put(html) {
    Array.prototype.slice.call(swap.parse(html).children).forEach(function (li) {
      if (transcript.querySelector('li[data-event="' + li.dataset.event + '"]')) return;
      var card = li.querySelector(".card[data-id]");
      if (card && cards.byId(card.dataset.id)) return;
      if (card && card.dataset.toolUse) {
        transcript.querySelectorAll('li[data-tool-use="' + card.dataset.toolUse + '"]').forEach(function (line) {
          line.remove();
        });
      }
      li.querySelectorAll(":scope > .entry-head time[datetime]").forEach(localTime);
      place(li);
      if (card) cards.started(card);
    });
  }

  var loadLines = swap.coalesce(function () {
    if (!asked.length) return null;
    var ids = asked.splice(0, 200);
    return swap.get(base + "entries?ids=" + ids.join(",")).then(function (html) {
      if (html === null) throw new Error("no lines");
      tries = 0;
      put(html);
      loadState();
      if (asked.length) loadLines();
    }).catch(function () {
      // Never lose an event's line: ask again, a little later each time.
      asked = ids.concat(asked);
      tries += 1;
      setTimeout(loadLines, Math.min(15000, 500 * Math.pow(2, tries)));
    });
  });

  /* Status and stack ------------------------------------------------------------------- */

  function applyStatus() {
    var badge = document.getElementById("thread-status");
    var status = badge.dataset.status;
    document.body.dataset.status = status;
    if (messageForm) messageForm.hidden = status !== "waiting_input";
    var finished = badge.dataset.finished === "true";
    if (cancel) cancel.hidden = finished;
    if (finished) dropAllBubbles();
  }

  /* Not had (the network, the server): asked for again a little later. */
  function later(load) {
    return function () { setTimeout(load, 2000); };
  }

  var loadState = swap.coalesce(function () {
    return swap.get(base + "state").then(function (html) {
      if (html === null) throw new Error("no state");
      swap.byIds(html);
      applyStatus();
    }).catch(later(function () { loadState(); }));
  });

  /* The batch panel and usage ----------------------------------------------------------- */

  var activity = {};  // instance frame id -> what its live text says it does now

  function showActivity(li) {
    var status = li.dataset.status;
    var doing = status === "running" || status === "waiting" ? activity[li.dataset.frame] || "" : "";
    var line = li.querySelector(".activity");
    fill(line, doing);
    line.hidden = !doing;
  }

  var loadBatch = swap.coalesce(function () {
    return swap.get(base + "batch").then(function (html) {
      if (html === null) throw new Error("no batch panel");
      swap.byIds(html);
      document.querySelectorAll("#instances li.instance").forEach(showActivity);
    }).catch(later(function () { loadBatch(); }));
  }, 1000);

  /* A running instance's duration ticks (the server wrote it when it rendered the line). */
  setInterval(function () {
    document.querySelectorAll("#instances li.instance[data-started]").forEach(function (li) {
      var started = Date.parse(li.dataset.started);
      if (isNaN(started)) return;
      li.querySelector(".duration").textContent = Math.max(0, Math.floor((Date.now() - started) / 1000)) + " s";
    });
  }, 1000);

  /* Live text --------------------------------------------------------------------------- */

  var bubbles = {};  // frame id -> {li, seq, lane}
  var stored = {};   // frame id -> text of its last AGENT_MESSAGE, until its live text restarts

  function setActivity(lane, text) {
    if (lane === null) return;
    activity[lane] = text;
    var li = document.querySelector('#instances li.instance[data-frame="' + lane + '"]');
    if (li) showActivity(li);
  }

  function dropBubble(frame) {
    var bubble = bubbles[frame];
    if (!bubble) return;
    bubble.li.remove();
    delete bubbles[frame];
    setActivity(bubble.lane, "");
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
    setActivity(bubble.lane, bubble.activity || (text ? "writing…" : ""));
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

  /* Events ----------------------------------------------------------------------------- */

  live.on(function (message) {
    if (message.thread !== thread) return;
    if (message.type === "AGENT_MESSAGE") messageStored(message.payload || {});
    if (REREAD.indexOf(message.type) !== -1) loadBatch();
    // Events the server already rendered come again when the page's cursor lagged behind.
    if (transcript.querySelector('li[data-event="' + message.id + '"]')) return;
    asked.push(message.id);
    loadLines();
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
  transcript.querySelectorAll(":scope > li[data-lane]").forEach(place);
  applyStatus();
  live.start();
})();

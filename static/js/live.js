/* The live connection (design.md, invariant 5): the page was rendered with a cursor; the socket
   replays every event after it, then streams. The client keeps the highest id it applied,
   ignores ids it has seen, and reconnects from its cursor with backoff, saying so plainly.
   window.__gateway exposes what it applied so the browser tests can check "none twice". */
(function () {
  "use strict";

  var data = JSON.parse(document.getElementById("live-data").textContent);
  var state = {
    cursor: data.cursor,
    initialCursor: data.cursor,
    applied: [],
    ignored: 0,
    connects: 0,
    socket: null,
  };
  window.__gateway = state;

  var handlers = [];
  var indicator = document.getElementById("connection");
  var attempt = 0;
  var retryTimer = null;
  var tickTimer = null;
  var watchdog = null;
  // The server sends a heartbeat every 20 s; silence for longer means a dead connection.
  var SILENCE_LIMIT = 45000;

  function show(name, text) {
    document.body.dataset.connection = name;
    if (!indicator) return;
    indicator.dataset.state = name;
    indicator.querySelector(".text").textContent = text;
  }

  function heard() {
    clearTimeout(watchdog);
    watchdog = setTimeout(function () {
      if (state.socket) state.socket.close();
    }, SILENCE_LIMIT);
  }

  function apply(message) {
    if (typeof message.id !== "number") return;  // heartbeats and pongs
    if (message.id <= state.cursor) {
      state.ignored += 1;
      return;
    }
    state.cursor = message.id;
    state.applied.push(message.id);
    handlers.forEach(function (handler) {
      try {
        handler(message);
      } catch (e) {
        console.error("applying event", message.id, e);
      }
    });
  }

  function connect() {
    clearTimeout(retryTimer);
    clearInterval(tickTimer);
    if (!navigator.onLine) {
      show("offline", "Offline: waiting for the network");
      return;
    }
    show(attempt ? "reconnecting" : "connecting", attempt ? "Reconnecting…" : "Connecting…");
    var scheme = location.protocol === "https:" ? "wss:" : "ws:";
    var socket;
    try {
      socket = new WebSocket(scheme + "//" + location.host + "/ws/events/?after=" + state.cursor);
    } catch (e) {
      retry();
      return;
    }
    state.socket = socket;
    socket.onopen = function () {
      attempt = 0;
      state.connects += 1;
      show("live", "Live");
      heard();
    };
    socket.onmessage = function (event) {
      heard();
      var message;
      try {
        message = JSON.parse(event.data);
      } catch (e) {
        return;
      }
      apply(message);
    };
    socket.onclose = function (event) {
      if (state.socket !== socket) return;
      state.socket = null;
      clearTimeout(watchdog);
      if (event.code === 4401) {
        location.assign("/login/?next=" + encodeURIComponent(location.pathname + location.search));
        return;
      }
      if (event.code === 4403) {
        show("offline", "Live updates are not allowed for this account");
        return;
      }
      retry();
    };
  }

  function retry() {
    attempt += 1;
    // 0.5 s, 1 s, 2 s ... up to 15 s, with jitter so a restarted server is not hit all at once.
    var delay = Math.min(15000, 500 * Math.pow(2, attempt - 1)) * (0.75 + Math.random() * 0.5);
    var due = Date.now() + delay;
    function tell() {
      var left = Math.max(0, Math.ceil((due - Date.now()) / 1000));
      show("reconnecting", "Connection lost. Reconnecting" + (left ? " in " + left + " s" : "…"));
    }
    tell();
    tickTimer = setInterval(tell, 1000);
    retryTimer = setTimeout(connect, delay);
  }

  window.addEventListener("offline", function () {
    show("offline", "Offline: waiting for the network");
    if (state.socket) state.socket.close();
  });
  window.addEventListener("online", function () {
    attempt = 0;
    connect();
  });

  function csrfToken() {
    var input = document.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  /* POST JSON to the API with the session and CSRF token; resolves to {status, body}. */
  function post(path, body) {
    return fetch(path, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
      body: JSON.stringify(body || {}),
    }).then(function (response) {
      return response.json().then(
        function (json) { return { status: response.status, body: json }; },
        function () { return { status: response.status, body: {} }; }
      );
    });
  }

  window.GatewayLive = {
    data: data,
    on: function (handler) { handlers.push(handler); },
    start: connect,
    post: post,
  };
})();

/* The live connection (design.md, invariant 5): the page was rendered with a cursor; the socket
   replays every event after it, then streams. The client keeps the highest id it applied,
   ignores ids it has seen, and reconnects from its cursor with backoff, saying so plainly.
   It says "Live" only while the server answers: after its first answer on a new socket, and
   no longer once a ping goes unanswered or a send fails. A message too big for the socket
   comes as a summary (`truncated`, agents/wire.py); the whole event is fetched over REST
   and handlers get events whole and in id order.
   A page that names a thread (live-data "thread") watches its live text too: LIVE_TEXT
   messages (approvals/live.py) are no events, have no id, never move the cursor, and go to the
   text handlers as they come; a new socket starts with the rows as they are then.
   Claims and presence (presence/session.py) travel on the same socket: PRESENCE and
   CLAIM_REFUSED messages go to the presence handlers, and send() carries the page's.
   window.__gateway exposes what it applied so the browser tests can check "none twice". */
(function () {
  "use strict";

  var data = JSON.parse(document.getElementById("live-data").textContent);
  var state = {
    cursor: data.cursor,
    initialCursor: data.cursor,
    applied: [],
    ignored: 0,
    texts: 0,
    connects: 0,
    socket: null,
  };
  window.__gateway = state;

  var handlers = [];
  var textHandlers = [];
  var presenceHandlers = [];
  var openHandlers = [];
  var indicator = document.getElementById("connection");
  var attempt = 0;
  var retryTimer = null;
  var tickTimer = null;
  var watchdog = null;
  var pinger = null;
  var applying = Promise.resolve();  // handlers run one event at a time, in id order
  // Log out closes this socket (4401) while the form's own answer is on its way, and that
  // answer says where to go (the identity provider's end-session page, docs/sso.md).
  var leaving = false;
  document.addEventListener("submit", function (event) {
    if (event.target.matches && event.target.matches("form.logout")) leaving = true;
  });
  // The page pings this often; the server answers at once (and sends a heartbeat every 20 s).
  var PING_INTERVAL = 15000;
  // No answer this long after a ping: the connection is dead, whatever the socket says.
  var ANSWER_LIMIT = 10000;

  function show(name, text) {
    document.body.dataset.connection = name;
    if (!indicator) return;
    indicator.dataset.state = name;
    indicator.querySelector(".text").textContent = text;
  }

  /* The socket is not receiving: leave "Live" at once and reconnect from the cursor. */
  function lost(socket) {
    if (state.socket !== socket) return;
    state.socket = null;
    clearInterval(pinger);
    clearTimeout(watchdog);
    watchdog = null;
    try {
      socket.close();
    } catch (e) { /* already closing */ }
    retry();
  }

  function ping(socket) {
    try {
      socket.send(JSON.stringify({ type: "ping" }));
    } catch (e) {
      lost(socket);
      return;
    }
    if (watchdog === null) {
      watchdog = setTimeout(function () { lost(socket); }, ANSWER_LIMIT);
    }
  }

  /* The whole event of a summary, from the REST API; the summary itself if that fails. */
  function whole(message) {
    if (!message.truncated || !message.url) return Promise.resolve(message);
    return fetch(message.url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : message; })
      .then(function (event) { return event && event.id === message.id ? event : message; },
            function () { return message; });
  }

  function call(list, value, what) {
    list.forEach(function (handler) {
      try {
        handler(value);
      } catch (e) {
        console.error(what, e);
      }
    });
  }

  function dispatch(message) {
    state.applied.push(message.id);
    call(handlers, message, "applying event " + message.id);
  }

  function apply(message) {
    if (message.type === "LIVE_TEXT") {
      state.texts += 1;
      call(textHandlers, message, "applying live text");
      return;
    }
    if (message.type === "PRESENCE" || message.type === "CLAIM_REFUSED") {
      call(presenceHandlers, message, "applying presence");
      return;
    }
    if (typeof message.id !== "number") return;  // heartbeats and pongs
    if (message.id <= state.cursor) {
      state.ignored += 1;
      return;
    }
    state.cursor = message.id;
    var fetched = whole(message);  // fetched at once, applied in turn
    applying = applying.then(function () { return fetched; }).then(dispatch);
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
      var watch = data.thread ? "&thread=" + encodeURIComponent(data.thread) : "";
      socket = new WebSocket(scheme + "//" + location.host + "/ws/events/?after=" + state.cursor + watch);
    } catch (e) {
      retry();
      return;
    }
    state.socket = socket;
    var answered = false;
    socket.onopen = function () {
      state.connects += 1;
      call(openHandlers, undefined, "opening");
      // Open is not yet live: the server answers the ping once it has replayed.
      ping(socket);
      pinger = setInterval(function () { ping(socket); }, PING_INTERVAL);
    };
    socket.onmessage = function (event) {
      if (state.socket !== socket) return;
      clearTimeout(watchdog);
      watchdog = null;
      if (!answered) {
        answered = true;
        attempt = 0;
        show("live", "Live");
      }
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
      clearInterval(pinger);
      clearTimeout(watchdog);
      watchdog = null;
      if (event.code === 4401) {
        if (leaving) return;
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
    onText: function (handler) { textHandlers.push(handler); },
    onOpen: function (handler) { openHandlers.push(handler); },
    onPresence: function (handler) { presenceHandlers.push(handler); },
    /* Send a message on the open socket; false when there is none. */
    send: function (message) {
      var socket = state.socket;
      if (!socket || socket.readyState !== WebSocket.OPEN) return false;
      socket.send(JSON.stringify(message));
      return true;
    },
    start: connect,
    post: post,
  };
})();

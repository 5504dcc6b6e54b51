/* Fetch and swap: the pages' pieces are rendered by the server only (approvals/fragments.py);
   a page asks for the piece an event concerns and puts it in place of the old one. */
(function () {
  "use strict";

  /* The HTML the server rendered (escaped by its templates), as a fragment of nodes. */
  function parse(html) {
    var holder = document.createElement("template");
    holder.innerHTML = html;
    return holder.content;
  }

  /* The text of a page piece; null when the server does not answer 200. inFlight() counts the
     pieces asked for and not yet handed over (the browser tests wait for it to be 0). */
  var asked = 0;
  function get(url) {
    asked += 1;
    function done(value) {
      asked -= 1;
      return value;
    }
    return fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(done, function (e) { done(); throw e; });
  }
  function inFlight() { return asked; }

  /* Put each top-level element of `html` in place of the page's element of the same id; one
     that holds the focus (a select being used) is left as it is. Returns the fragment. */
  function byIds(html) {
    var fragment = parse(html);
    Array.prototype.slice.call(fragment.children).forEach(function (fresh) {
      var old = fresh.id && document.getElementById(fresh.id);
      if (old && !old.contains(document.activeElement)) old.replaceWith(fresh);
    });
    return fragment;
  }

  /* `task()` (a promise) at most once at a time: asked for again while it runs, it runs once
     more after, so a burst of events costs at most two requests. At least `gap` ms apart. */
  function coalesce(task, gap) {
    var running = false;
    var again = false;
    var last = 0;
    function run() {
      if (running) {
        again = true;
        return;
      }
      running = true;
      again = false;
      var wait = Math.max(0, last + (gap || 0) - Date.now());
      setTimeout(function () {
        last = Date.now();
        Promise.resolve().then(task).catch(function (e) { console.error(e); }).then(function () {
          running = false;
          if (again) run();
        });
      }, wait);
    }
    return run;
  }

  /* A press is not lost to a redraw. The browser sends the click to what both the press and
     the release hit: a card drawn again, or a part put into it, between the two takes the
     click nowhere or to another button. So a change to the card being pressed waits until the
     click is over (a release, then its click, then these run). */
  var pressed = null;  // the card a pointer is down on
  var held = [];
  document.addEventListener("pointerdown", function (event) {
    pressed = event.target instanceof Element ? event.target.closest(".card") : null;
  }, true);
  function release() {
    if (!pressed) return;
    setTimeout(function () {
      pressed = null;
      var changes = held;
      held = [];
      changes.forEach(function (change) { change(); });
    }, 0);
  }
  document.addEventListener("pointerup", release, true);
  document.addEventListener("pointercancel", release, true);
  window.addEventListener("blur", release);

  /* Run `change` (which redraws `card` or a part of it) now, or once the press on it is over. */
  function whenReleased(card, change) {
    if (pressed && pressed === card) held.push(change);
    else change();
  }

  window.GatewaySwap = { parse: parse, get: get, inFlight: inFlight, byIds: byIds, coalesce: coalesce, whenReleased: whenReleased };
})();

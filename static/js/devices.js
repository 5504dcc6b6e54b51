/* The account page's notifications: this browser's push subscription made (after the
   person allows notifications) with the server's VAPID key, and sent to the gateway, which
   keeps it for them (webpush.views.add_device). The service worker (/sw.js) shows the
   pushes. Removing a device is a plain form; removing this one also ends its subscription
   in the browser. */
(function () {
  "use strict";

  var form = document.querySelector(".device-add");
  if (!form) return;
  var said = form.querySelector(".device-error");
  var button = form.querySelector("button[type=submit]");
  var csrf = form.querySelector("input[name=csrfmiddlewaretoken]").value;

  function show(text) {
    said.textContent = text;
    said.hidden = !text;
  }

  function supported() {
    return "serviceWorker" in navigator && "PushManager" in window && "Notification" in window;
  }

  function bytes(base64url) {
    var plain = atob(base64url.replace(/-/g, "+").replace(/_/g, "/"));
    var out = new Uint8Array(plain.length);
    for (var i = 0; i < plain.length; i++) out[i] = plain.charCodeAt(i);
    return out;
  }

  function same(buffer, key) {
    if (!buffer) return false;
    var a = new Uint8Array(buffer);
    if (a.length !== key.length) return false;
    for (var i = 0; i < a.length; i++) if (a[i] !== key[i]) return false;
    return true;
  }

  function digest(text) {
    return crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)).then(function (d) {
      return Array.prototype.map.call(new Uint8Array(d), function (b) {
        return ("0" + b.toString(16)).slice(-2);
      }).join("");
    });
  }

  function current() {
    if (!supported()) return Promise.resolve(null);
    return navigator.serviceWorker.getRegistration("/").then(function (registration) {
      return registration ? registration.pushManager.getSubscription() : null;
    });
  }

  function post(path, body) {
    return fetch(path, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
      body: JSON.stringify(body),
    }).then(function (response) {
      return response.json().then(
        function (json) { return { status: response.status, body: json }; },
        function () { return { status: response.status, body: {} }; }
      );
    });
  }

  // This browser's row in the list, when the gateway keeps its subscription.
  var mine = current().then(function (subscription) {
    if (!subscription) return null;
    return digest(subscription.endpoint).then(function (hex) {
      var row = document.querySelector('[data-endpoint-digest="' + hex + '"]');
      if (row) {
        row.querySelector(".device-this").hidden = false;
        form.querySelector(".device-on").hidden = false;
        form.querySelector("label").hidden = true;
        button.hidden = true;
      }
      return row ? { row: row, subscription: subscription } : null;
    });
  }).catch(function () { return null; });

  if (!supported()) {
    show("This browser cannot receive notifications from a web page. On an iPhone or iPad, " +
      "add the gateway to the Home Screen (Share, Add to Home Screen) and open it from there.");
    button.disabled = true;
  } else if (Notification.permission === "denied") {
    show("Notifications are blocked for this site: allow them in the browser's site settings.");
  }

  document.querySelectorAll(".device-remove").forEach(function (removing) {
    removing.addEventListener("submit", function (event) {
      event.preventDefault();
      mine.then(function (found) {
        if (found && found.row.contains(removing)) return found.subscription.unsubscribe();
        return null;
      }).catch(function () { return null; }).then(function () { removing.submit(); });
    });
  });

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    show("");
    button.disabled = true;
    var key = bytes(form.dataset.key);
    Notification.requestPermission().then(function (permission) {
      if (permission !== "granted") {
        throw new Error("notifications are not allowed for this site in this browser.");
      }
      return navigator.serviceWorker.register(form.dataset.worker, { scope: "/" });
    }).then(function () {
      return navigator.serviceWorker.ready;
    }).then(function (registration) {
      return registration.pushManager.getSubscription().then(function (old) {
        // A subscription made with another server key cannot be pushed to with this one.
        if (old && same(old.options.applicationServerKey, key)) return old;
        return (old ? old.unsubscribe() : Promise.resolve()).then(function () {
          return registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
        });
      });
    }).then(function (subscription) {
      var name = form.querySelector("input[name=device-name]").value.trim();
      return post(form.dataset.add, { name: name, subscription: subscription.toJSON() });
    }).then(function (r) {
      if (r.status !== 201) throw new Error(r.body.detail || "the server answered " + r.status + ".");
      window.location.assign(window.location.pathname + "?devices=on");
    }).catch(function (e) {
      button.disabled = false;
      show("Notifications were not turned on: " + (e && e.message ? e.message : "the browser refused."));
    });
  });
})();

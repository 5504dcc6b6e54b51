/* The service worker (served at /sw.js by webpush.views, scope /): it shows the gateway's
   pushes as notifications and opens a request's card when one is tapped. Nothing else: it
   caches nothing and answers no fetch.

   A push's data is JSON (webpush.messages): {"type": "show", "tag", "title", "body", "url",
   "renotify"} shows a notification, replacing one with the same tag (a reminder replaces
   its request's); {"type": "close", "tag"} closes the notifications with that tag, once
   nothing in the request waits. Its texts are shown as text: a notification renders no
   markup. */
"use strict";

var ICON = "/static/icons/icon-192.png";

self.addEventListener("install", function () {
  self.skipWaiting();
});

self.addEventListener("activate", function (event) {
  // The pages already open become this worker's clients, so a tap can bring one to a card.
  event.waitUntil(self.clients.claim());
});

function text(value, limit) {
  return String(value == null ? "" : value).slice(0, limit);
}

function closeTagged(tag) {
  return self.registration.getNotifications({ tag: tag }).then(function (shown) {
    shown.forEach(function (n) { n.close(); });
  });
}

function show(data) {
  return self.registration.showNotification(text(data.title, 200) || "A request waits", {
    body: text(data.body, 400),
    tag: text(data.tag, 100),
    renotify: Boolean(data.renotify && data.tag),
    icon: ICON,
    badge: ICON,
    data: { url: text(data.url, 2000) },
  });
}

self.addEventListener("push", function (event) {
  var data = {};
  try {
    data = event.data ? event.data.json() : {};
  } catch (e) {
    data = {};
  }
  if (data.type === "close" && data.tag) {
    event.waitUntil(closeTagged(text(data.tag, 100)));
  } else {
    event.waitUntil(show(data));
  }
});

/* The card a notification leads to: its URL on this origin, or the inbox. */
function cardFor(notification) {
  var url = notification && notification.data && notification.data.url;
  try {
    var found = new URL(url, self.location.origin);
    if (found.origin === self.location.origin) return found.href;
  } catch (e) { /* not a URL: the inbox */ }
  return new URL("/", self.location.origin).href;
}

function focused(client) {
  return client.focus().catch(function () { return client; });
}

/* A window of the gateway already at the card is brought forward; else an open window of it
   goes to the card; else a new window opens there. */
function openCard(url) {
  return self.clients.matchAll({ type: "window" }).then(function (windows) {
    var there = windows.filter(function (c) { return c.url === url; })[0];
    if (there) return focused(there);
    if (windows.length) {
      return windows[0].navigate(url).then(function (moved) {
        return moved ? focused(moved) : self.clients.openWindow(url);
      });
    }
    return self.clients.openWindow(url);
  });
}

self.addEventListener("notificationclick", function (event) {
  event.notification.close();
  event.waitUntil(openCard(cardFor(event.notification)));
});

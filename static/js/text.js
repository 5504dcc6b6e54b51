/* Untrusted text into the page (invariant 6): as text nodes, never markup, with each invisible
   or direction-changing character shown as a marker, [U+202E], instead of being applied (an
   account number must not read backwards). approvals/templatetags/visible.py CONTROL is the
   same class for what the server renders. */
(function () {
  "use strict";

  var CONTROL = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F\u061C\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u206F\uFEFF\uFFF9-\uFFFB]|\uDB40[\uDC00-\uDC7F]/g;

  function codePoint(char) {
    var hex = char.codePointAt(0).toString(16).toUpperCase();
    while (hex.length < 4) hex = "0" + hex;
    return "U+" + hex;
  }

  /* Replace the element's content with `text`, controls marked: <span class="ctl">[U+202E]</span>. */
  function fill(element, text) {
    text = text === null || text === undefined ? "" : String(text);
    var nodes = [];
    var last = 0;
    text.replace(CONTROL, function (char, at) {
      if (at > last) nodes.push(document.createTextNode(text.slice(last, at)));
      var marker = document.createElement("span");
      marker.className = "ctl";
      marker.textContent = "[" + codePoint(char) + "]";
      nodes.push(marker);
      last = at + char.length;
      return char;
    });
    if (last < text.length || !nodes.length) nodes.push(document.createTextNode(text.slice(last)));
    element.replaceChildren.apply(element, nodes);
  }

  /* JSON text for an editor: each control written as its \uXXXX escape, which JSON reads back
     as the same character (controls only occur inside JSON strings). */
  function escapeJson(text) {
    return String(text).replace(CONTROL, function (char) {
      var out = "";
      for (var i = 0; i < char.length; i += 1) {
        out += "\\u" + ("000" + char.charCodeAt(i).toString(16)).slice(-4);
      }
      return out;
    });
  }

  window.GatewayText = { fill: fill, escapeJson: escapeJson };
})();

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

  /* The display limits (approvals/excerpt.py), which the pages carry on <body>
     (approvals/limits.py): the most bytes of one value, and of a card's arguments in all. */
  function limit(name) {
    return Number(document.body.dataset[name]) || 4096;
  }

  var encoder = new TextEncoder();
  var decoder = new TextDecoder();

  /* The text's size in bytes of UTF-8. */
  function size(text) {
    return encoder.encode(text).length;
  }

  /* approvals/excerpt.py `cut`: at most `max` bytes of the text's UTF-8, cut between characters;
     {text, cut, size}: `cut`, the number of bytes left out of the `size` of the whole. */
  function cut(text, max) {
    text = text === null || text === undefined ? "" : String(text);
    if (max === undefined) max = limit("displayValue");
    // A UTF-16 unit is at most 3 bytes of UTF-8: text this short fits without being encoded.
    if (text.length * 3 <= max) return { text: text, cut: 0 };
    var bytes = encoder.encode(text);
    if (bytes.length <= max) return { text: text, cut: 0 };
    var end = Math.max(max, 0);
    while (end > 0 && (bytes[end] & 0xC0) === 0x80) end -= 1;  // not inside a character
    return { text: decoder.decode(bytes.subarray(0, end)), cut: bytes.length - end, size: bytes.length };
  }

  /* Fill the element with an excerpt of the text (approvals/templatetags/excerpts.py): what fits
     `max` bytes, then "… 1,048,000 more bytes — show the whole value" linking to `url`. `text`
     may be an excerpt cut already ({text, cut}). */
  function excerpt(element, text, url, max) {
    var shown = text !== null && typeof text === "object" ? text : cut(text, max);
    fill(element, shown.text);
    if (!shown.cut) return shown;
    var note = document.createElement("span");
    note.className = "cut";
    note.textContent = "… " + shown.cut.toLocaleString("en-US") + " more bytes";
    if (url) {
      note.appendChild(document.createTextNode(" — "));
      var link = document.createElement("a");
      link.href = url;
      link.target = "_blank";
      link.rel = "noopener";
      link.textContent = "show the whole value";
      note.appendChild(link);
    }
    element.appendChild(note);
    return shown;
  }

  window.GatewayText = {
    fill: fill, escapeJson: escapeJson, cut: cut, excerpt: excerpt, limit: limit, size: size,
  };
})();

/* Passkeys in the browser (navigator.credentials), for the account page (static/js/account.js)
   and a step_up card's Approve (static/js/cards.js). The server sends its options as the
   `webauthn` package writes them (binary values in base64url) and takes the answers back the
   same way (access.passkeys); this file converts between those and the browser's buffers. */
(function () {
  "use strict";

  function toBytes(text) {
    var b64 = text.replace(/-/g, "+").replace(/_/g, "/");
    while (b64.length % 4) b64 += "=";
    var raw = atob(b64);
    var bytes = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    return bytes.buffer;
  }

  function toText(buffer) {
    var bytes = new Uint8Array(buffer);
    var raw = "";
    for (var i = 0; i < bytes.length; i++) raw += String.fromCharCode(bytes[i]);
    return btoa(raw).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function descriptors(list) {
    return (list || []).map(function (d) {
      var copy = { type: d.type, id: toBytes(d.id) };
      if (d.transports) copy.transports = d.transports;
      return copy;
    });
  }

  function supported() {
    return !!(window.PublicKeyCredential && navigator.credentials);
  }

  /* navigator.credentials.create with the server's registration options; resolves to the
     credential as the server reads it. */
  function create(options) {
    var publicKey = Object.assign({}, options, {
      challenge: toBytes(options.challenge),
      user: Object.assign({}, options.user, { id: toBytes(options.user.id) }),
      excludeCredentials: descriptors(options.excludeCredentials),
    });
    return navigator.credentials.create({ publicKey: publicKey }).then(function (c) {
      var r = c.response;
      return {
        id: c.id,
        rawId: toText(c.rawId),
        type: c.type,
        authenticatorAttachment: c.authenticatorAttachment || undefined,
        clientExtensionResults: c.getClientExtensionResults(),
        response: {
          clientDataJSON: toText(r.clientDataJSON),
          attestationObject: toText(r.attestationObject),
          transports: r.getTransports ? r.getTransports() : [],
        },
      };
    });
  }

  /* navigator.credentials.get with the server's assertion options; resolves to the
     assertion as the server reads it. */
  function get(options) {
    var publicKey = Object.assign({}, options, {
      challenge: toBytes(options.challenge),
      allowCredentials: descriptors(options.allowCredentials),
    });
    return navigator.credentials.get({ publicKey: publicKey }).then(function (c) {
      var r = c.response;
      return {
        id: c.id,
        rawId: toText(c.rawId),
        type: c.type,
        authenticatorAttachment: c.authenticatorAttachment || undefined,
        clientExtensionResults: c.getClientExtensionResults(),
        response: {
          clientDataJSON: toText(r.clientDataJSON),
          authenticatorData: toText(r.authenticatorData),
          signature: toText(r.signature),
          userHandle: r.userHandle ? toText(r.userHandle) : undefined,
        },
      };
    });
  }

  window.GatewayPasskeys = { supported: supported, create: create, get: get };
})();

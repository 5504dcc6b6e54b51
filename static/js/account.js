/* The account page: add a passkey (its options from the server, the browser's answer back;
   static/js/passkeys.js converts them). Removing is a plain form. */
(function () {
  "use strict";

  var form = document.querySelector(".passkey-add");
  if (!form) return;
  var said = form.querySelector(".passkey-error");

  function show(text) {
    said.textContent = text;
    said.hidden = !text;
  }

  function post(path, body) {
    return fetch(path, {
      method: "POST",
      credentials: "same-origin",
      headers: {
        "Content-Type": "application/json",
        "X-CSRFToken": form.querySelector("input[name=csrfmiddlewaretoken]").value,
      },
      body: JSON.stringify(body || {}),
    }).then(function (response) {
      return response.json().then(
        function (json) { return { status: response.status, body: json }; },
        function () { return { status: response.status, body: {} }; }
      );
    });
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    show("");
    if (!window.GatewayPasskeys.supported()) {
      show("This browser cannot use passkeys.");
      return;
    }
    var button = form.querySelector("button[type=submit]");
    button.disabled = true;
    var name = form.querySelector("input[name=passkey-name]").value.trim();
    post(form.dataset.options).then(function (r) {
      if (r.status !== 200) throw new Error(r.body.detail || "The server answered " + r.status + ".");
      return window.GatewayPasskeys.create(r.body);
    }).then(function (credential) {
      return post(form.dataset.register, { name: name, credential: credential });
    }).then(function (r) {
      if (r.status !== 201) throw new Error(r.body.detail || "The server answered " + r.status + ".");
      window.location.assign(window.location.pathname + "?done=added");
    }).catch(function (e) {
      button.disabled = false;
      show("No passkey was added: " + (e && e.message ? e.message : "the browser refused."));
    });
  });
})();

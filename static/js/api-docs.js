// /api/docs: the vendored Swagger UI (static/vendor/swagger-ui) showing /api/openapi.json.
// "Try it out" calls the API with the page's session; changes carry the CSRF token, as the
// API asks of sessions (approvals/auth.py).
(function () {
  "use strict";
  var body = document.body;
  window.SwaggerUIBundle({
    url: body.dataset.spec,
    dom_id: "#api-docs",
    deepLinking: true,
    requestInterceptor: function (request) {
      if (!/^(GET|HEAD|OPTIONS)$/i.test(request.method || "GET")) {
        request.headers["X-CSRFToken"] = body.dataset.csrf;
      }
      return request;
    },
  });
})();

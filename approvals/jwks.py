"""The receipts' public keys at /.well-known/jwks.json (agents.receipt_keys).

Open to anyone, as a JWKS is meant to be: a verifier outside the gateway (an auditor, an
outside agent's client) checks a receipt with these keys alone. It holds public keys only,
never the private halves, and says nothing about requests or people.
"""

import hashlib
import json

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from agents import receipt_keys

# Short: after manage.py rotate_receipt_key a verifier that cached the set sees the new key
# within this many seconds (receipts signed by it may arrive as soon as RECEIPT_KEY_CACHE_SECONDS).
MAX_AGE = 60


@require_GET
def jwks(request: HttpRequest) -> HttpResponse:
    # The first key is made on first use: a fresh deployment publishes one before it decides.
    receipt_keys.current()
    body = json.dumps(receipt_keys.jwks())
    etag = '"' + hashlib.sha256(body.encode()).hexdigest()[:32] + '"'
    if etag in request.headers.get("If-None-Match", ""):
        response = HttpResponse(status=304)
    else:
        response = HttpResponse(body, content_type="application/jwk-set+json")
    response["ETag"] = etag
    response["Cache-Control"] = f"max-age={MAX_AGE}"
    return response

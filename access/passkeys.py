"""Reviewers' passkeys (WebAuthn, through the `webauthn` package): registering one, removing
one, and checking the assertion a reviewer signs to approve a `step_up` request.

A ceremony has two halves: its options, with a fresh challenge kept in the reviewer's session
(for one purpose and one subject, PASSKEY_CHALLENGE_SECONDS at most), then the browser's
answer, verified against that challenge, which is spent whatever the answer: an assertion
replayed finds no challenge. The relying party is PASSKEY_RP_ID, and only answers signed for
one of PASSKEY_ORIGINS are taken. Registering and removing are audited here
(PASSKEY_REGISTERED, PASSKEY_REMOVED); an assertion moves the passkey's sign count by a
conditional update, so one assertion approves once even when sent twice at the same moment.
"""

import time
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import TextChoices
from django.utils import timezone
from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers import base64url_to_bytes, bytes_to_base64url
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    AuthenticatorTransport,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from access.models import Passkey
from agents import events

SESSION_KEY = "passkey_challenge"
RP_NAME = "Approval gateway"
MAX_NAME_CHARS = 100


class Notice(TextChoices):
    """The Event types this module records (agents.models.Event.type holds any string)."""

    REGISTERED = "PASSKEY_REGISTERED"
    REMOVED = "PASSKEY_REMOVED"


class Refused(Exception):
    """A ceremony that did not succeed; `detail` says why, for the reviewer."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


# The challenge, kept in the session -------------------------------------------------------


def _remember(session: Any, purpose: str, subject: str, challenge: bytes) -> None:
    session[SESSION_KEY] = {
        "purpose": purpose,
        "subject": subject,
        "challenge": bytes_to_base64url(challenge),
        "expires": time.time() + settings.PASSKEY_CHALLENGE_SECONDS,
    }


def _take(session: Any, purpose: str, subject: str) -> bytes:
    """The challenge kept for this purpose and subject, removed: it answers once."""
    kept = session.pop(SESSION_KEY, None)
    if (
        not isinstance(kept, dict)
        or kept.get("purpose") != purpose
        or kept.get("subject") != subject
        or kept.get("expires", 0) < time.time()
    ):
        raise Refused("The passkey's challenge was used or has expired: try again.")
    return base64url_to_bytes(kept["challenge"])


def _descriptor(passkey: Passkey) -> PublicKeyCredentialDescriptor:
    transports = []
    for name in passkey.transports or []:
        try:
            transports.append(AuthenticatorTransport(name))
        except ValueError:
            continue  # a transport this version of the library does not know
    return PublicKeyCredentialDescriptor(
        id=base64url_to_bytes(passkey.credential_id), transports=transports or None
    )


def _audit(passkey: Passkey, via: str) -> dict[str, Any]:
    return {
        "user": passkey.user.get_username(),
        "passkey": passkey.pk,
        "name": passkey.name,
        "credential": passkey.credential_id,
        "via": via,
    }


# Registering and removing ---------------------------------------------------------------


def registration_options(user: Any, session: Any) -> str:
    """The options of navigator.credentials.create for `user`, as JSON; their challenge is
    kept in `session`. The user's passkeys are excluded (an authenticator registers once)."""
    options = generate_registration_options(
        rp_id=settings.PASSKEY_RP_ID,
        rp_name=RP_NAME,
        user_name=user.get_username(),
        user_id=str(user.pk).encode(),
        exclude_credentials=[_descriptor(p) for p in user.passkeys.all()],
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.PREFERRED,
            user_verification=UserVerificationRequirement.REQUIRED,
        ),
    )
    _remember(session, "register", str(user.pk), options.challenge)
    return options_to_json(options)


def register(user: Any, session: Any, credential: Any, name: str) -> Passkey:
    """Verify the browser's answer to registration_options and keep the passkey, with its
    PASSKEY_REGISTERED event, in one transaction. Raises Refused."""
    name = (name or "").strip()[:MAX_NAME_CHARS] or "Passkey"
    challenge = _take(session, "register", str(user.pk))
    try:
        verified = verify_registration_response(
            credential=credential,
            expected_challenge=challenge,
            expected_rp_id=settings.PASSKEY_RP_ID,
            expected_origin=settings.PASSKEY_ORIGINS,
            require_user_verification=True,
        )
    except (WebAuthnException, ValueError, TypeError, KeyError) as e:
        raise Refused(f"The passkey could not be registered: {e}") from e
    transports = (
        credential.get("response", {}).get("transports") if isinstance(credential, dict) else None
    )
    try:
        with transaction.atomic():
            passkey = Passkey.objects.create(
                user=user,
                name=name,
                credential_id=bytes_to_base64url(verified.credential_id),
                public_key=verified.credential_public_key,
                sign_count=verified.sign_count,
                transports=[t for t in transports or [] if isinstance(t, str)][:8],
            )
            events.record(Notice.REGISTERED, actor=user, payload=_audit(passkey, "page"))
    except IntegrityError as e:
        raise Refused("This passkey is registered already.") from e
    return passkey


def remove(user: Any, passkey_id: int) -> bool:
    """Remove one of `user`'s passkeys, with its PASSKEY_REMOVED event; False when they have
    no such passkey."""
    with transaction.atomic():
        found = Passkey.objects.select_for_update().filter(pk=passkey_id, user=user).first()
        if found is None:
            return False
        payload = _audit(found, "page")
        found.delete()
        events.record(Notice.REMOVED, actor=user, payload=payload)
    return True


# Asserting (the step-up) ----------------------------------------------------------------


def assertion_options(user: Any, session: Any, subject: str) -> str:
    """The options of navigator.credentials.get for `user`'s passkeys, as JSON, with a
    challenge kept in `session` for `subject` (what the assertion approves). Raises Refused
    when they have none."""
    passkeys = list(user.passkeys.all())
    if not passkeys:
        raise Refused("You have no passkey: register one on your account page first.")
    options = generate_authentication_options(
        rp_id=settings.PASSKEY_RP_ID,
        allow_credentials=[_descriptor(p) for p in passkeys],
        user_verification=UserVerificationRequirement.REQUIRED,
    )
    _remember(session, "assert", subject, options.challenge)
    return options_to_json(options)


def verify_assertion(user: Any, session: Any, subject: str, credential: Any) -> Passkey:
    """The passkey of `user` that signed the challenge kept for `subject`, its sign count and
    last use updated. Raises Refused: no challenge (used, expired, or for something else), a
    credential that is not theirs, a signature or origin that does not verify, a sign count
    that went back (a cloned authenticator), or the same assertion taken at the same moment."""
    challenge = _take(session, "assert", subject)
    raw_id = credential.get("rawId") if isinstance(credential, dict) else None
    passkey = (
        Passkey.objects.filter(user=user, credential_id=raw_id).first()
        if isinstance(raw_id, str)
        else None
    )
    if passkey is None:
        raise Refused("This passkey is not one of yours: register it on your account page.")
    try:
        verified = verify_authentication_response(
            credential=credential,
            expected_challenge=challenge,
            expected_rp_id=settings.PASSKEY_RP_ID,
            expected_origin=settings.PASSKEY_ORIGINS,
            credential_public_key=bytes(passkey.public_key),
            credential_current_sign_count=passkey.sign_count,
            require_user_verification=True,
        )
    except (WebAuthnException, ValueError, TypeError, KeyError) as e:
        raise Refused(f"The passkey's answer was refused: {e}") from e
    now = timezone.now()
    moved = Passkey.objects.filter(pk=passkey.pk, sign_count=passkey.sign_count).update(
        sign_count=verified.new_sign_count, last_used_at=now
    )
    if moved != 1:
        raise Refused("The passkey's answer was refused: it was used at the same moment.")
    passkey.sign_count, passkey.last_used_at = verified.new_sign_count, now
    return passkey


def proof(passkey: Passkey) -> dict[str, str]:
    """What a decision carries once its passkey verified (agents.policy.check_step_up) and
    what the decision's event records (agents.decisions)."""
    return {"credential": passkey.credential_id, "name": passkey.name}

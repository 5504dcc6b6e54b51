"""The gateway user a person signs in as: found by their identity (issuer and subject), made at
their first sign-in, and brought up to date at each one from the claims: the verified email,
the names and, when groups come from the provider, the groups, replaced whole. Each sign-in is
one transaction; a user made (SSO_USER_CREATED) or changed (SSO_USER_UPDATED) is audited in it.
"""

import hashlib
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.db.models import TextChoices
from django.utils import timezone

from agents import events, locks
from sso.claims import MAX_USERNAME, Person, gateway_groups
from sso.models import Identity

# Provider groups named in an audit event, at most.
AUDITED_GROUPS = 50


class Notice(TextChoices):
    """The Event types this module records (agents.models.Event.type holds any string)."""

    CREATED = "SSO_USER_CREATED"
    UPDATED = "SSO_USER_UPDATED"


class Deactivated(Exception):
    """The person's gateway user is deactivated: no sign-in, whatever the provider says."""


def sign_in(person: Person) -> Any:
    """The active gateway user `person` signs in as, made or brought up to date. Raises
    Deactivated. Two first sign-ins of one person at once make one user: the loser of the
    identity's unique key reads the winner's."""
    try:
        return _sign_in(person)
    except IntegrityError:
        return _sign_in(person)


def _sign_in(person: Person) -> Any:
    with transaction.atomic():
        identity = (
            Identity.objects.select_related("user")
            .filter(issuer=person.issuer, subject=person.subject)
            .first()
        )
        if identity is None:
            return _create(person)
        locks.user(identity.user_id)
        user = get_user_model().objects.get(pk=identity.user_id)
        if not user.is_active:
            raise Deactivated
        changes = _update(user, person)
        added, removed = _set_groups(user, person)
        identity.email = person.email
        identity.signed_in_at = timezone.now()
        identity.save(update_fields=["email", "signed_in_at"])
        if changes or added or removed:
            payload = _audit(user, person)
            payload.update(changes=changes, groups_added=added, groups_removed=removed)
            events.record(Notice.UPDATED, actor=user, payload=payload)
        return user


def _create(person: Person) -> Any:
    user = get_user_model()(
        username=_free_username(person),
        email=person.email,
        first_name=person.first_name,
        last_name=person.last_name,
    )
    # Never a password: this user signs in through the provider only.
    user.set_unusable_password()
    user.save()
    Identity.objects.create(
        user=user,
        issuer=person.issuer,
        subject=person.subject,
        email=person.email,
        signed_in_at=timezone.now(),
    )
    added, _ = _set_groups(user, person)
    payload = _audit(user, person)
    payload.update(email=person.email, groups=added)
    events.record(Notice.CREATED, actor=user, payload=payload)
    return user


def _update(user: Any, person: Person) -> dict[str, list[str]]:
    """The profile from the claims; what changed, as [before, after]. An email the provider
    stopped sending is kept."""
    wanted = {"first_name": person.first_name, "last_name": person.last_name}
    if person.email:
        wanted["email"] = person.email
    changes = {
        field: [getattr(user, field), value]
        for field, value in wanted.items()
        if getattr(user, field) != value
    }
    if changes:
        for field, (_, value) in changes.items():
            setattr(user, field, value)
        user.save(update_fields=list(changes))
    return changes


def _set_groups(user: Any, person: Person) -> tuple[list[str], list[str]]:
    """Replace the user's groups with those their provider groups give, when groups come from
    the provider; the names added and removed. A group the gateway lacks is not made."""
    if person.provider_groups is None:
        return [], []
    wanted = list(Group.objects.filter(name__in=gateway_groups(person.provider_groups)))
    current = {g.name for g in user.groups.all()}
    names = {g.name for g in wanted}
    if names == current:
        return [], []
    user.groups.set(wanted)
    return sorted(names - current), sorted(current - names)


def _free_username(person: Person) -> str:
    """The person's username when no one has it, else it with a tag of their identity: a
    local user of the same name is someone else until an administrator says otherwise."""
    users = get_user_model().objects
    if not users.filter(username=person.username).exists():
        return person.username
    tag = hashlib.sha256(f"{person.issuer}\n{person.subject}".encode()).hexdigest()
    tagged = f"{person.username[: MAX_USERNAME - 9]}-{tag[:8]}"
    return tagged if not users.filter(username=tagged).exists() else f"oidc-{tag[:32]}"


def _audit(user: Any, person: Person) -> dict[str, Any]:
    return {
        "user": user.get_username(),
        "issuer": person.issuer,
        "subject": person.subject,
        "provider_groups": list((person.provider_groups or ())[:AUDITED_GROUPS]),
        "via": "oidc",
    }

"""Signing in through the identity provider: the user is made from the claims with the groups
the provider's give, kept by the provider's subject (never the email), brought up to date at
each sign-in with the change audited, and a deactivated user stays out."""

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from agents.models import Event
from sso.models import Identity


@pytest.fixture
def finance(db: Any) -> Group:
    return Group.objects.create(name="finance")


def groups(user: User) -> list[str]:
    return sorted(user.groups.values_list("name", flat=True))


def trail() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (e.type, e.actor_name, e.payload)
        for e in Event.objects.filter(type__startswith="SSO_").order_by("id")
    ]


def test_the_first_sign_in_makes_the_user_with_the_groups_and_lands_in_the_inbox(
    db: Any, provider: Any, sign_in: Any, finance: Group
) -> None:
    provider.add(
        "dana",
        email="dana@example.com",
        email_verified=True,
        preferred_username="dana",
        given_name="Dana",
        family_name="Scully",
        groups=["reviewers", "finance", "not-a-gateway-group"],
    )
    client = Client()
    answer = sign_in(client, "dana", next="/grants/")
    assert answer.status_code == 302 and answer["Location"] == "/grants/"

    user = User.objects.get(username="dana")
    assert (user.email, user.first_name, user.last_name) == ("dana@example.com", "Dana", "Scully")
    assert groups(user) == ["finance", "reviewers"]
    assert not user.has_usable_password()
    identity = Identity.objects.get(user=user)
    assert (identity.issuer, identity.subject) == (provider.url, "sub-dana")
    # Signed in: the inbox answers, and the reviewers' group lets them decide.
    assert client.get("/").status_code == 200
    assert user.has_perm("agents.decide_suspension")
    [(kind, actor, payload)] = trail()
    assert (kind, actor) == ("SSO_USER_CREATED", "dana")
    assert payload["groups"] == ["finance", "reviewers"]
    assert payload["subject"] == "sub-dana" and payload["email"] == "dana@example.com"


def test_a_second_sign_in_replaces_the_groups_and_the_audit_says_what_changed(
    db: Any, provider: Any, sign_in: Any, finance: Group
) -> None:
    provider.add("dana", email="dana@example.com", email_verified=True, groups=["reviewers"])
    sign_in(Client(), "dana")
    user = User.objects.get(username="dana")
    assert groups(user) == ["reviewers"]

    provider.add("dana", email="dana@corp.example", email_verified=True, groups=["finance"])
    answer = sign_in(Client(), "dana")
    assert answer.status_code == 302
    user.refresh_from_db()
    assert groups(user) == ["finance"] and user.email == "dana@corp.example"
    assert not user.has_perm("agents.decide_suspension")
    kind, actor, payload = trail()[-1]
    assert (kind, actor) == ("SSO_USER_UPDATED", "dana")
    assert payload["groups_added"] == ["finance"]
    assert payload["groups_removed"] == ["reviewers"]
    assert payload["changes"]["email"] == ["dana@example.com", "dana@corp.example"]

    # Nothing changed: signed in, and nothing audited.
    sign_in(Client(), "dana")
    assert len(trail()) == 2


def test_the_group_map_names_the_only_provider_groups_that_count(
    db: Any, provider: Any, sign_in: Any, finance: Group, settings: Any
) -> None:
    settings.OIDC_GROUP_MAP = {"gw-approvers": ["reviewers"], "gw-money": ["finance"]}
    provider.add("erin", groups=["gw-approvers", "finance"])
    sign_in(Client(), "erin")
    assert groups(User.objects.get(username="erin")) == ["reviewers"]


def test_without_a_groups_claim_setting_the_admins_groups_stay(
    db: Any, provider: Any, sign_in: Any, finance: Group, settings: Any
) -> None:
    provider.add("erin", groups=["reviewers"])
    sign_in(Client(), "erin")
    user = User.objects.get(username="erin")
    user.groups.add(finance)
    settings.OIDC_GROUPS_CLAIM = ""
    provider.add("erin", groups=[])
    sign_in(Client(), "erin")
    assert groups(user) == ["finance", "reviewers"]


def test_an_email_that_moves_to_someone_else_does_not_take_the_account(
    db: Any, provider: Any, sign_in: Any, users: Any
) -> None:
    provider.add("dana", email="ops@example.com", email_verified=True, groups=["reviewers"])
    sign_in(Client(), "dana")
    dana = User.objects.get(identities__subject="sub-dana")
    # At the provider, the address now belongs to another person, who has a name a local
    # password user has too.
    provider.add("alice", email="ops@example.com", email_verified=True, preferred_username="alice")
    client = Client()
    sign_in(client, "alice")
    newcomer = User.objects.get(identities__subject="sub-alice")
    assert newcomer.pk not in (dana.pk, users["reviewer"].pk)
    assert newcomer.username.startswith("alice-") and groups(newcomer) == []
    assert int(client.session["_auth_user_id"]) == newcomer.pk


def test_a_deactivated_user_stays_out(db: Any, provider: Any, sign_in: Any) -> None:
    provider.add("dana", groups=["reviewers"])
    sign_in(Client(), "dana")
    User.objects.filter(username="dana").update(is_active=False)
    client = Client()
    answer = sign_in(client, "dana")
    assert answer.status_code == 403
    assert "This account is deactivated" in answer.content.decode()
    assert "_auth_user_id" not in client.session


def test_the_login_page_offers_the_provider_and_the_start_keeps_where_to_go(
    db: Any, provider: Any
) -> None:
    page = Client().get("/login/?next=/grants/").content.decode()
    assert "Sign in with Stand-in ID" in page
    assert 'href="/sso/start?next=/grants/"' in page
    assert 'name="password"' in page  # passwords are on

    started = Client().get("/sso/start")
    query = parse_qs(urlsplit(started["Location"]).query)
    assert query["code_challenge_method"] == ["S256"] and query["code_challenge"]
    assert query["state"] and query["nonce"]
    assert query["scope"] == ["openid email profile"]
    assert query["redirect_uri"] == ["http://localhost:8000/sso/callback"]


def test_a_gateway_without_a_provider_shows_no_button(db: Any) -> None:
    assert "Sign in with" not in Client().get("/login/").content.decode()
    assert Client().get("/sso/start").status_code == 404

"""A token's life: made with scopes, a name and an expiry by command, listed, used, refused once
expired or revoked (by command or in the admin), every change audited without the token."""

import json
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from access.models import ApiToken
from access.tokens import parse_expiry
from agents.models import Event


def command(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def bearer(raw: str) -> Client:
    return Client(headers={"Authorization": f"Bearer {raw}"})


def trail(type: str) -> list[Event]:
    return list(Event.objects.filter(type=type).order_by("id"))


class CreateTestCase:
    def test_it_makes_a_scoped_named_expiring_token_and_audits_it(
        self, users: dict[str, Any]
    ) -> None:
        before = timezone.now()
        raw = command(
            "create_api_token", "alice", "--scope", "runs", "--scope", "decide",
            "--expires", "30d", "--name", "ci",
        ).strip()  # fmt: skip
        token = ApiToken.objects.get()
        assert token.user == users["reviewer"] and token.name == "ci"
        assert sorted(token.scopes) == ["decide", "runs"]
        assert before + timedelta(days=30) <= token.expires_at <= timezone.now() + timedelta(30)
        [event] = trail("TOKEN_CREATED")
        assert event.thread_id is None and event.actor_id is None
        assert event.payload["token"] == token.pk and event.payload["name"] == "ci"
        assert event.payload["user"] == "alice" and event.payload["scopes"] == ["decide", "runs"]
        assert event.payload["via"] == "command"
        assert raw not in json.dumps(event.payload) and raw[10:] not in json.dumps(event.payload)
        assert bearer(raw).get("/api/suspensions").status_code == 200
        assert bearer(raw).get("/api/threads").status_code == 200  # runs: its own
        token.refresh_from_db()
        assert token.last_used_at is not None

    @pytest.mark.parametrize(
        "given, expected",
        [
            ("90m", timedelta(minutes=90)),
            ("12h", timedelta(hours=12)),
            ("2w", timedelta(weeks=2)),
        ],
    )
    def test_expires_takes_a_duration(self, given: str, expected: timedelta) -> None:
        now = datetime(2026, 1, 1, tzinfo=UTC)
        assert parse_expiry(given, now) == now + expected

    def test_expires_takes_an_iso_date_or_date_and_time(self) -> None:
        now = datetime(2026, 1, 1, tzinfo=UTC)
        assert parse_expiry("2027-01-31", now) == datetime(2027, 1, 31, tzinfo=UTC)
        assert parse_expiry("2027-01-31T18:00:00+01:00", now) == datetime(
            2027, 1, 31, 17, tzinfo=UTC
        )
        assert parse_expiry("2027-01-31T18:00", now) == datetime(2027, 1, 31, 18, tzinfo=UTC)

    @pytest.mark.parametrize("given", ["0d", "soon", "5y", "2020-01-01", "31/01/2027"])
    def test_a_bad_or_past_expiry_is_refused_and_nothing_is_made(
        self, users: dict[str, Any], given: str
    ) -> None:
        with pytest.raises(CommandError, match="--expires"):
            command("create_api_token", "alice", "--expires", given)
        assert not ApiToken.objects.exists() and not trail("TOKEN_CREATED")

    def test_an_unknown_scope_is_refused(self, users: dict[str, Any]) -> None:
        with pytest.raises(CommandError, match="invalid choice"):
            command("create_api_token", "alice", "--scope", "everything")
        assert not ApiToken.objects.exists()

    def test_without_scope_the_token_has_every_scope(self, users: dict[str, Any]) -> None:
        command("create_api_token", "admin")
        assert sorted(ApiToken.objects.get().scopes) == ["admin", "decide", "read", "runs"]


class ExpiryTestCase:
    def test_an_expired_token_is_refused_saying_so(
        self, users: dict[str, Any], time_machine: Any
    ) -> None:
        raw = command("create_api_token", "alice", "--expires", "1h").strip()
        client = bearer(raw)
        assert client.get("/api/suspensions").status_code == 200
        time_machine.move_to(timezone.now() + timedelta(minutes=61))
        r = client.get("/api/suspensions")
        assert r.status_code == 401
        assert r.json()["error"] == "unauthenticated" and "expired" in r.json()["detail"]
        assert r["WWW-Authenticate"].startswith("Bearer")
        assert ApiToken.objects.get().status == "expired"


class RevokeTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        self.users = users
        self.raw = command("create_api_token", "alice", "--name", "laptop").strip()
        self.token = ApiToken.objects.get()

    def assert_revoked(self, actor: Any, via: str) -> None:
        r = bearer(self.raw).get("/api/suspensions")
        assert r.status_code == 401 and "revoked" in r.json()["detail"]
        self.token.refresh_from_db()  # the row stays, for the trail
        assert self.token.revoked_at is not None and self.token.status == "revoked"
        assert self.token.revoked_by == actor
        [event] = trail("TOKEN_REVOKED")
        assert event.actor == actor and event.thread_id is None
        assert event.payload["token"] == self.token.pk and event.payload["via"] == via
        assert event.payload["name"] == "laptop" and event.payload["revoked_at"]
        assert self.raw not in json.dumps(event.payload)

    @pytest.mark.parametrize("named_by", ["id", "prefix"])
    def test_the_command_revokes_by_id_or_prefix(self, named_by: str) -> None:
        assert bearer(self.raw).get("/api/suspensions").status_code == 200
        name = str(self.token.pk) if named_by == "id" else self.token.prefix
        assert "Revoked" in command("revoke_api_token", name)
        self.assert_revoked(None, "command")
        assert "already" in command("revoke_api_token", name)
        assert len(trail("TOKEN_REVOKED")) == 1

    def test_an_unknown_token_is_an_error(self) -> None:
        with pytest.raises(CommandError, match="No token"):
            command("revoke_api_token", "gw_nothere")

    def test_the_list_shows_tokens_never_their_values(self) -> None:
        command("create_api_token", "bob", "--scope", "read", "--name", "dash")
        listed = command("list_api_tokens")
        assert "laptop" in listed and "dash" in listed and "read" in listed
        assert self.raw not in listed and self.raw[10:] not in listed
        command("revoke_api_token", str(self.token.pk))
        assert "laptop" not in command("list_api_tokens")
        everything = command("list_api_tokens", "--all")
        assert "laptop" in everything and "revoked" in everything
        assert "dash" not in command("list_api_tokens", "alice", "--all")

    def test_the_admin_lists_and_revokes_but_neither_adds_edits_nor_deletes(self) -> None:
        browser = Client()
        browser.force_login(self.users["admin"])
        listing = browser.get("/admin/access/apitoken/")
        assert listing.status_code == 200
        page = listing.content.decode()
        assert self.token.prefix in page and "laptop" in page and self.raw not in page
        assert "Revoke the selected tokens" in page
        assert browser.get("/admin/access/apitoken/add/").status_code == 403
        assert browser.get(f"/admin/access/apitoken/{self.token.pk}/delete/").status_code in (
            403,
            302,
        )
        detail = browser.get(f"/admin/access/apitoken/{self.token.pk}/change/")
        assert detail.status_code == 200 and 'name="name"' not in detail.content.decode()
        r = browser.post(
            "/admin/access/apitoken/",
            {"action": "revoke", "_selected_action": [str(self.token.pk)]},
        )
        assert r.status_code == 302
        self.assert_revoked(self.users["admin"], "admin")
        assert ApiToken.objects.filter(pk=self.token.pk).exists()

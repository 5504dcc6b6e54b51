"""POST /slack/interactions: a signed Approve click by a linked reviewer decides as the REST
API does; anyone else, a forged or old request, or a retry changes nothing."""

import hashlib
import hmac
import json
import time
from typing import Any
from urllib.parse import urlencode

import pytest
from django.test import Client

from agents.models import Event, Suspension
from slack_approvals.models import SlackLink
from tests.conftest import Api
from tests.slack_approvals.conftest import SECRET, agent_file, deliver, raise_request
from tests.slack_approvals.standin import SlackStandIn

URL = "/slack/interactions"


def signed_post(
    payload: dict[str, Any], timestamp: int | None = None, secret: str = SECRET, retry: int = 0
) -> Any:
    """POST a payload to /slack/interactions as Slack does: a form, signed."""
    body = urlencode({"payload": json.dumps(payload)})
    ts = str(timestamp if timestamp is not None else int(time.time()))
    digest = hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    headers = {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}
    if retry:
        headers.update({"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"})
    return Client().post(
        URL, body, content_type="application/x-www-form-urlencoded", headers=headers
    )


def click(
    s: Suspension,
    slack_user: str,
    action: str = "approve",
    trigger: str = "",
    timestamp: int | None = None,
    secret: str = SECRET,
    retry: int = 0,
) -> Any:
    """Slack's POST for a button pressed in #payments, signed as Slack signs it."""
    payload = {
        "type": "block_actions",
        "user": {"id": slack_user, "username": slack_user.lower()},
        "trigger_id": trigger or f"trigger-{slack_user}-{time.monotonic_ns()}",
        "channel": {"id": "C0PAYMENTS"},
        "container": {"type": "message", "channel_id": "C0PAYMENTS", "message_ts": "1.000001"},
        "actions": [{"action_id": action, "value": str(s.pk), "type": "button"}],
    }
    return signed_post(payload, timestamp, secret, retry)


class InteractionTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any, slack: SlackStandIn) -> None:
        self.users = users
        self.slack = slack
        self.load = load_agents
        load_agents(agent_file())
        deliver()
        SlackLink.objects.create(user=users["reviewer"], slack_user_id="U0ALICE")
        SlackLink.objects.create(user=users["teammate"], slack_user_id="U0BOB")

    def told(self) -> list[tuple[str, str]]:
        """The ephemeral messages sent: (to whom, what)."""
        return [(c.body["user"], c.body["text"]) for c in self.slack.called("chat.postEphemeral")]

    def decided(self, s: Suspension) -> list[str]:
        types = (Event.Type.SUSPENSION_DECIDED, Event.Type.SUSPENSION_VOTED)
        return list(
            Event.objects.filter(suspension=s, type__in=types).values_list("type", flat=True)
        )

    def test_an_approval_by_a_linked_reviewer_approves_and_updates_the_message(self) -> None:
        s = raise_request()
        deliver()
        assert click(s, "U0ALICE").status_code == 200
        s.refresh_from_db()
        assert (s.status, s.decided_by_name) == ("approved", "alice")
        assert self.decided(s) == ["SUSPENSION_DECIDED"]
        deliver()
        [message] = self.slack.messages.values()
        assert "*Approved by alice at " in json.dumps(message["blocks"])
        assert self.told() == []

    def test_the_runs_starter_is_refused_by_four_eyes_in_the_apis_words(self) -> None:
        s = raise_request(starter=self.users["reviewer"])
        click(s, "U0ALICE")
        s.refresh_from_db()
        assert s.status == "pending" and self.decided(s) == []
        path = f"/api/threads/{s.thread_id}/suspensions/{s.pk}/resume"
        refused = Api(self.users["reviewer"]).post(path, {"approved": True})
        assert refused.status_code == 403
        assert self.told() == [("U0ALICE", refused.json()["detail"])]

    def test_an_unlinked_user_is_refused(self) -> None:
        s = raise_request()
        click(s, "U0STRANGER")
        s.refresh_from_db()
        assert s.status == "pending"
        [(to, text)] = self.told()
        assert to == "U0STRANGER" and "not linked to a gateway user" in text

    def test_a_linked_user_without_the_permission_is_refused(self) -> None:
        SlackLink.objects.create(user=self.users["outsider"], slack_user_id="U0MALLORY")
        s = raise_request()
        click(s, "U0MALLORY")
        s.refresh_from_db()
        assert s.status == "pending"
        assert self.told() == [
            ("U0MALLORY", "You may not decide requests, so this click changed nothing.")
        ]

    @pytest.mark.parametrize(
        "forged", [{"secret": "not-the-secret"}, {"timestamp": int(time.time()) - 6 * 60}]
    )
    def test_a_forged_signature_or_an_old_timestamp_answers_401(
        self, forged: dict[str, Any], caplog: Any
    ) -> None:
        s = raise_request()
        assert click(s, "U0ALICE", **forged).status_code == 401
        s.refresh_from_db()
        assert s.status == "pending" and self.slack.calls == []
        assert "failed the signature check" in caplog.text

    @pytest.mark.parametrize(
        "headers",
        [{}, {"X-Slack-Request-Timestamp": "soon", "X-Slack-Signature": "v0=00"}],
    )
    def test_a_request_without_a_usable_signature_answers_401(
        self, headers: dict[str, str]
    ) -> None:
        s = raise_request()
        body = urlencode({"payload": json.dumps({"type": "block_actions", "actions": []})})
        answer = Client().post(
            URL, body, content_type="application/x-www-form-urlencoded", headers=headers
        )
        assert answer.status_code == 401
        s.refresh_from_db()
        assert s.status == "pending"

    def test_a_retried_click_decides_once(self) -> None:
        self.load(agent_file().replace("    slack:", "    policy: {quorum: 2}\n    slack:"))
        s = raise_request()
        click(s, "U0ALICE", trigger="t-1")
        assert click(s, "U0ALICE", trigger="t-1", retry=1).status_code == 200
        # A vote is recorded once, though voting again would record it again.
        assert self.decided(s) == ["SUSPENSION_VOTED"]

    def test_a_quorum_of_two_over_slack(self) -> None:
        self.load(agent_file().replace("    slack:", "    policy: {quorum: 2}\n    slack:"))
        s = raise_request()
        deliver()
        click(s, "U0ALICE")
        deliver()
        [message] = self.slack.messages.values()
        assert "1 of 2 approvals" in json.dumps(message["blocks"])
        click(s, "U0BOB")
        s.refresh_from_db()
        assert (s.status, s.decided_by_name) == ("approved", "bob")
        deliver()
        assert "*Approved by bob at " in json.dumps(message["blocks"])

    def test_clicks_count_against_the_decisions_rate_limit(self, settings: Any) -> None:
        settings.RATE_LIMIT_USER_DECISIONS = "1/minute"
        first = raise_request()
        second = raise_request()
        click(first, "U0BOB")
        click(second, "U0BOB")
        first.refresh_from_db()
        second.refresh_from_db()
        assert (first.status, second.status) == ("approved", "pending")
        [(to, text)] = self.told()
        assert to == "U0BOB" and text.startswith("You may decide at most 1 times per minute")

    def test_slack_off_answers_404(self, settings: Any) -> None:
        s = raise_request()
        settings.SLACK_SIGNING_SECRET = ""
        assert click(s, "U0ALICE").status_code == 404

    @pytest.mark.parametrize("action", ["open", "a-button-of-a-later-version"])
    def test_the_open_link_or_an_unknown_button_is_acked_and_changes_nothing(
        self, action: str
    ) -> None:
        s = raise_request()
        answer = click(s, "U0ALICE", action=action)
        assert (answer.status_code, answer.content) == (200, b"")
        s.refresh_from_db()
        assert s.status == "pending" and self.decided(s) == []
        assert self.told() == [] and self.slack.views == []

    def test_an_unknown_modal_closes_and_changes_nothing(self) -> None:
        s = raise_request()
        view = {"type": "modal", "callback_id": "a-later-modal", "private_metadata": str(s.pk)}
        answer = self.submit(view, "U0ALICE", typed="no")
        assert (answer.status_code, answer.content) == (200, b"")
        s.refresh_from_db()
        assert s.status == "pending" and self.decided(s) == []

    def test_a_click_decides_while_slacks_web_api_is_unreachable(self, settings: Any) -> None:
        s = raise_request()
        settings.SLACK_API_URL = "http://127.0.0.1:1/api/"  # nothing listens there
        assert click(s, "U0ALICE").status_code == 200
        s.refresh_from_db()
        assert (s.status, s.decided_by_name) == ("approved", "alice")

    @pytest.mark.parametrize("body", [b"payload=%7Bnot-json", b"payload=\xff"])
    def test_a_body_that_is_not_slacks_form_answers_400(self, body: bytes) -> None:
        answer = Client().post(
            URL,
            body,
            content_type="application/x-www-form-urlencoded",
            headers={"X-Slack-Request-Timestamp": str(int(time.time()))},
        )
        assert answer.status_code == 400

    def submit(
        self, view: dict[str, Any], slack_user: str, preset: str = "", typed: str = ""
    ) -> Any:
        """The modal submitted: Slack's view_submission with the fields' state."""
        values: dict[str, Any] = {
            "reason": {"reason_text": {"type": "plain_text_input", "value": typed or None}}
        }
        if preset:
            values["preset"] = {
                "preset_reason": {"type": "static_select", "selected_option": {"value": preset}}
            }
        payload = {
            "type": "view_submission",
            "user": {"id": slack_user},
            "trigger_id": f"submit-{time.monotonic_ns()}",
            "view": {**view, "id": "V1", "state": {"values": values}},
        }
        return signed_post(payload)

    @pytest.mark.parametrize(
        "shape", ["a view without a type", "a view that is text", "a list", "text", "actions"]
    )
    def test_a_signed_payload_of_the_wrong_shape_answers_400_and_decides_nothing(
        self, shape: str
    ) -> None:
        """Signed, but not shaped as Slack's: Reject…'s submission whose view has no `type`
        (Bolt read it unchecked and answered 500), parts that are not objects."""
        s = raise_request()
        view = {"callback_id": "reject", "private_metadata": str(s.pk), "id": "V1"}
        submission = {
            "type": "view_submission",
            "user": {"id": "U0ALICE"},
            "trigger_id": f"submit-{time.monotonic_ns()}",
            "view": {**view, "state": {"values": {}}},
        }
        payload: Any = {
            "a view without a type": submission,
            "a view that is text": {**submission, "view": "reject"},
            "a list": [submission],
            "text": "view_submission",
            "actions": {"type": "block_actions", "user": {"id": "U0ALICE"}, "actions": "approve"},
        }[shape]
        answer = signed_post(payload)
        assert answer.status_code == 400
        s.refresh_from_db()
        assert s.status == "pending" and self.decided(s) == []
        assert self.slack.calls == []

    def test_a_reject_with_a_reason_from_the_modal(self) -> None:
        self.load(
            agent_file().replace(
                "    slack:",
                "    tool_overrides:\n"
                "      transfer_funds: {reject_reasons: [Wrong amount, Already paid]}\n"
                "    slack:",
            )
        )
        s = raise_request()
        deliver()
        click(s, "U0ALICE", action="reject")
        [view] = self.slack.views
        assert view["private_metadata"] == str(s.pk)
        options = view["blocks"][1]["element"]["options"]
        assert [o["text"]["text"] for o in options] == ["Wrong amount", "Already paid"]
        s.refresh_from_db()
        assert s.status == "pending"  # opening the modal decides nothing
        answer = self.submit(view, "U0ALICE", preset="1", typed="paid on the 3rd")
        assert answer.status_code == 200 and answer.content == b""
        s.refresh_from_db()
        assert (s.status, s.reason, s.decided_by_name) == (
            "rejected",
            "Already paid · paid on the 3rd",
            "alice",
        )
        deliver()
        [message] = self.slack.messages.values()
        shown = json.dumps(message["blocks"], ensure_ascii=False)
        assert "*Rejected by alice at " in shown and " · Already paid · paid on the 3rd*" in shown

    def test_a_refused_reject_shows_the_refusal_in_the_modal(self) -> None:
        s = raise_request(starter=self.users["reviewer"])
        click(s, "U0BOB", action="reject")
        [view] = self.slack.views
        SlackLink.objects.filter(slack_user_id="U0BOB").update(slack_user_id="U0ALICEX")
        SlackLink.objects.filter(user=self.users["reviewer"]).update(slack_user_id="U0BOB")
        # Submitted by the run's starter (linked as U0BOB now): four eyes refuses.
        answer = self.submit(view, "U0BOB", typed="no")
        body = answer.json()
        assert body["response_action"] == "errors"
        assert "start" in body["errors"]["reason"].lower()
        s.refresh_from_db()
        assert s.status == "pending"

    def test_an_unlinked_user_gets_no_modal(self) -> None:
        s = raise_request()
        click(s, "U0STRANGER", action="reject")
        assert self.slack.views == []
        [(to, text)] = self.told()
        assert to == "U0STRANGER" and "not linked" in text


class LinkByEmailTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any, slack: SlackStandIn) -> None:
        self.users = users
        self.slack = slack
        load_agents(agent_file())
        for user in users.values():
            user.email = f"{user.username}@example.com"
            user.save(update_fields=["email"])
        slack.add_user("U0ALICE", "alice", "alice@example.com")
        slack.add_user("U0UNSURE", "alice2", "alice@example.com", confirmed=False)
        slack.add_user("U0OTHER", "zed", "zed@example.com")

    def test_it_is_off_by_default(self) -> None:
        s = raise_request()
        click(s, "U0ALICE")
        s.refresh_from_db()
        assert s.status == "pending" and not SlackLink.objects.exists()
        assert self.slack.called("users.info") == []

    def test_a_confirmed_email_of_one_active_user_links_them(self, settings: Any) -> None:
        settings.SLACK_LINK_BY_EMAIL = True
        s = raise_request()
        click(s, "U0ALICE")
        s.refresh_from_db()
        assert (s.status, s.decided_by_name) == ("approved", "alice")
        assert SlackLink.objects.get(slack_user_id="U0ALICE").user == self.users["reviewer"]

    @pytest.mark.parametrize("slack_user", ["U0UNSURE", "U0OTHER"])
    def test_an_unconfirmed_or_unknown_email_links_nobody(
        self, slack_user: str, settings: Any
    ) -> None:
        settings.SLACK_LINK_BY_EMAIL = True
        s = raise_request()
        click(s, slack_user)
        s.refresh_from_db()
        assert s.status == "pending" and not SlackLink.objects.exists()

"""The Connect Slack step: a reviewer gives their Slack member id on /slack/connect, the bot
sends that Slack user a button, and only that Slack user's signed click, with a token unused
and unexpired, links the two."""

import json
import time
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from access import ratelimits
from agents.models import Event
from slack_approvals import links
from slack_approvals.models import SlackLink, SlackLinkRequest
from tests.slack_approvals.standin import SlackStandIn
from tests.slack_approvals.test_interactions import signed_post

PAGE = "/slack/connect"


class ConnectTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], slack: SlackStandIn) -> None:
        self.users = users
        self.slack = slack
        ratelimits.storage().reset()  # Redis keeps counters between tests

    def browser(self, who: str = "reviewer") -> Client:
        client = Client()
        client.force_login(self.users[who])
        return client

    def dms(self) -> list[dict[str, Any]]:
        """The direct messages sent, as chat.postMessage got them."""
        return [c.body for c in self.slack.called("chat.postMessage")]

    def token(self, n: int = -1) -> str:
        """The token on the button of the n-th direct message."""
        blocks = self.dms()[n]["blocks"]
        blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
        [button] = blocks[1]["elements"]
        assert (button["action_id"], button["text"]["text"]) == (
            "confirm_link",
            "Yes, link my account",
        )
        return str(button["value"])

    def press(self, token: str, slack_user: str) -> Any:
        """Slack's signed POST for the button pressed in the direct message."""
        payload = {
            "type": "block_actions",
            "user": {"id": slack_user},
            "trigger_id": f"trigger-{time.monotonic_ns()}",
            "channel": {"id": "D0ALICE"},
            "container": {"type": "message", "channel_id": "D0ALICE", "message_ts": "1.000001"},
            "actions": [{"action_id": "confirm_link", "value": token, "type": "button"}],
        }
        return signed_post(payload)

    def told(self) -> list[tuple[str, str]]:
        return [(c.body["user"], c.body["text"]) for c in self.slack.called("chat.postEphemeral")]

    def audit(self) -> list[tuple[str, str, dict[str, Any]]]:
        rows = Event.objects.filter(type__startswith="SLACK_").order_by("id")
        return [(e.type, e.actor_name, e.payload) for e in rows]

    def test_the_page_needs_a_login_and_the_permission_to_decide(self) -> None:
        anonymous = Client().get(PAGE)
        assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
        assert self.browser("outsider").get(PAGE).status_code == 403
        refused = self.browser("outsider").post(PAGE, {"member_id": "U0MALLORY"})
        assert refused.status_code == 403 and self.dms() == []
        page = self.browser().get(PAGE)
        assert page.status_code == 200
        assert b"Your account is not linked to Slack" in page.content
        assert f'href="{PAGE}"'.encode() in self.browser().get("/email/").content  # linked

    def test_it_needs_the_csrf_token(self) -> None:
        client = Client(enforce_csrf_checks=True)
        client.force_login(self.users["reviewer"])
        assert client.post(PAGE, {"member_id": "U0ALICE"}).status_code == 403
        assert self.dms() == []

    def test_asking_sends_one_direct_message_with_the_button(self) -> None:
        alice = self.browser()
        sent = alice.post(PAGE, {"member_id": "U0ALICE"})
        assert sent.status_code == 302
        [dm] = self.dms()
        assert dm["channel"] == "U0ALICE" and "*alice* asked the approval gateway" in dm["text"]
        token = self.token()
        # Only the token's hash is kept.
        request = SlackLinkRequest.objects.get()
        assert token not in request.token_hash and request.slack_user_id == "U0ALICE"
        page = alice.get(PAGE).content.decode()
        assert "Check Slack" in page and "U0ALICE" in page
        assert not SlackLink.objects.exists() and self.audit() == []

    def test_the_click_by_that_slack_user_links_them(self) -> None:
        self.browser().post(PAGE, {"member_id": "U0ALICE"})
        assert self.press(self.token(), "U0ALICE").status_code == 200
        link = SlackLink.objects.get()
        assert (link.user, link.slack_user_id) == (self.users["reviewer"], "U0ALICE")
        [message] = self.slack.messages.values()
        assert message["text"] == "Linked to gateway user alice."
        assert "confirm_link" not in json.dumps(message["blocks"])
        assert self.audit() == [
            (
                "SLACK_LINKED",
                "alice",
                {"user": "alice", "slack_user_id": "U0ALICE", "via": "connect"},
            )
        ]
        assert self.told() == []
        page = self.browser().get(PAGE).content.decode()
        assert "Linked to the Slack member <strong>U0ALICE</strong>" in page

    def test_a_click_by_another_slack_user_changes_nothing(self) -> None:
        self.browser().post(PAGE, {"member_id": "U0ALICE"})
        token = self.token()
        self.press(token, "U0MALLORY")
        assert not SlackLink.objects.exists() and self.audit() == []
        [(to, text)] = self.told()
        assert to == "U0MALLORY" and "made for another Slack account" in text
        # The token is still good for the Slack user it was sent to.
        self.press(token, "U0ALICE")
        assert SlackLink.objects.get().slack_user_id == "U0ALICE"

    def test_a_used_token_changes_nothing(self) -> None:
        self.browser().post(PAGE, {"member_id": "U0ALICE"})
        token = self.token()
        self.press(token, "U0ALICE")
        self.browser().post(PAGE, {"action": "unlink"})
        self.press(token, "U0ALICE")
        assert not SlackLink.objects.exists()
        assert [t for t, _, _ in self.audit()] == ["SLACK_LINKED", "SLACK_UNLINKED"]
        [(to, text)] = self.told()
        assert to == "U0ALICE" and "unknown, used or expired" in text

    def test_an_expired_or_unknown_token_changes_nothing(self) -> None:
        self.browser().post(PAGE, {"member_id": "U0ALICE"})
        SlackLinkRequest.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
        self.press(self.token(), "U0ALICE")
        self.press("made-up", "U0ALICE")
        assert not SlackLink.objects.exists() and self.audit() == []
        texts = [text for _, text in self.told()]
        assert len(texts) == 2 and all("unknown, used or expired" in t for t in texts)
        assert "Check Slack" not in self.browser().get(PAGE).content.decode()

    def test_a_new_request_replaces_the_earlier_one(self) -> None:
        alice = self.browser()
        alice.post(PAGE, {"member_id": "U0ALICE"})
        first = self.token()
        alice.post(PAGE, {"member_id": "U0ALICE"})
        self.press(first, "U0ALICE")
        assert not SlackLink.objects.exists()
        self.press(self.token(), "U0ALICE")
        assert SlackLink.objects.get().user == self.users["reviewer"]

    def test_a_slack_account_linked_to_another_user_is_refused(self) -> None:
        SlackLink.objects.create(user=self.users["teammate"], slack_user_id="U0BOB")
        refused = self.browser().post(PAGE, {"member_id": "U0BOB"})
        assert refused.status_code == 409
        assert b"linked to another gateway user" in refused.content and self.dms() == []

    def test_a_click_for_an_account_linked_meanwhile_changes_nothing(self) -> None:
        self.browser().post(PAGE, {"member_id": "U0ALICE"})
        SlackLink.objects.create(user=self.users["teammate"], slack_user_id="U0ALICE")
        self.press(self.token(), "U0ALICE")
        assert SlackLink.objects.get().user == self.users["teammate"] and self.audit() == []
        [(_, text)] = self.told()
        assert "linked to another gateway user" in text
        assert SlackLinkRequest.objects.get().used_at is None

    def test_a_click_after_an_email_linked_the_same_two_says_linked(self, settings: Any) -> None:
        self.browser().post(PAGE, {"member_id": "U0ALICE"})
        links.link(self.users["reviewer"], "U0ALICE", via="email")
        self.press(self.token(), "U0ALICE")
        assert SlackLink.objects.get().user == self.users["reviewer"] and self.told() == []
        [message] = self.slack.messages.values()
        assert message["text"] == "Linked to gateway user alice."

    def test_linking_by_email_is_audited_too(self, settings: Any) -> None:
        settings.SLACK_LINK_BY_EMAIL = True
        self.users["reviewer"].email = "alice@example.com"
        self.users["reviewer"].save(update_fields=["email"])
        self.slack.add_user("U0ALICE", "alice", "alice@example.com")
        assert links.user_for("U0ALICE") == self.users["reviewer"]
        assert self.audit() == [
            ("SLACK_LINKED", "alice", {"user": "alice", "slack_user_id": "U0ALICE", "via": "email"})
        ]

    @pytest.mark.parametrize("member_id", ["", "alice", "C0PAYMENTS", "U0<b>", "U" + "1" * 41])
    def test_a_bad_member_id_is_refused_with_a_clear_error(self, member_id: str) -> None:
        refused = self.browser().post(PAGE, {"member_id": member_id})
        assert refused.status_code == 400
        assert b"A Slack member ID looks like U012AB3CD" in refused.content
        assert self.dms() == [] and not SlackLinkRequest.objects.exists()

    def test_a_member_slack_does_not_know_is_refused(self) -> None:
        self.slack.fail_next(status=200, error="user_not_found")
        refused = self.browser().post(PAGE, {"member_id": "U0NOBODY"})
        assert refused.status_code == 400
        assert b"Slack has no member with that ID" in refused.content
        assert not SlackLinkRequest.objects.exists()

    def test_asking_is_rate_limited(self, settings: Any) -> None:
        settings.RATE_LIMIT_SLACK_CONNECT = "1/hour"
        alice = self.browser()
        alice.post(PAGE, {"member_id": "U0ALICE"})
        refused = alice.post(PAGE, {"member_id": "U0ALICE"})
        assert refused.status_code == 429
        assert b"You may ask Slack to link an account at most 1 times per hour" in refused.content
        assert len(self.dms()) == 1

    def test_unlinking_removes_the_link(self) -> None:
        SlackLink.objects.create(user=self.users["reviewer"], slack_user_id="U0ALICE")
        alice = self.browser()
        assert b"Unlink" in alice.get(PAGE).content
        done = alice.post(PAGE, {"action": "unlink"})
        assert done.status_code == 302
        assert not SlackLink.objects.exists()
        assert self.audit() == [
            (
                "SLACK_UNLINKED",
                "alice",
                {"user": "alice", "slack_user_id": "U0ALICE", "via": "page"},
            )
        ]
        assert b"Unlinked." in alice.get(done["Location"]).content

    def test_slack_off_hides_the_page(self, settings: Any) -> None:
        settings.SLACK_BOT_TOKEN = ""
        alice = self.browser()
        assert alice.get(PAGE).status_code == 404
        assert alice.post(PAGE, {"member_id": "U0ALICE"}).status_code == 404
        assert PAGE.encode() not in alice.get("/email/").content  # not linked
        assert self.dms() == []

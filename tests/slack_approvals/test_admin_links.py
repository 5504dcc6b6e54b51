"""Slack links added or removed in the admin are audited as the Connect step's are
(slack_approvals.links: SLACK_LINKED, SLACK_UNLINKED), with the admin as the actor; a link is
not edited there (remove it, add another), so no change goes unrecorded."""

from typing import Any

import pytest
from django.test import Client

from agents.models import Event
from slack_approvals.models import SlackLink

LINKS = "/admin/slack_approvals/slacklink/"


def trail() -> list[tuple[str, str, dict[str, Any]]]:
    rows = Event.objects.filter(type__startswith="SLACK_").order_by("id")
    return [(e.type, e.actor_name, e.payload) for e in rows]


def audited(kind: str, user: str, slack_user_id: str) -> tuple[str, str, dict[str, Any]]:
    return (kind, "admin", {"user": user, "slack_user_id": slack_user_id, "via": "admin"})


class AdminLinksTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        self.users = users
        self.browser = Client()
        self.browser.force_login(users["admin"])

    def add(self, who: str, slack_user_id: str) -> SlackLink:
        form = {"user": self.users[who].pk, "slack_user_id": slack_user_id}
        assert self.browser.post(f"{LINKS}add/", form).status_code == 302
        return SlackLink.objects.get(slack_user_id=slack_user_id)

    def test_a_link_added_then_removed_is_audited_each_time(self) -> None:
        link = self.add("reviewer", "U0ALICE")
        assert link.user == self.users["reviewer"]
        assert trail() == [audited("SLACK_LINKED", "alice", "U0ALICE")]

        answer = self.browser.post(f"{LINKS}{link.pk}/delete/", {"post": "yes"})
        assert answer.status_code == 302 and not SlackLink.objects.exists()
        assert trail() == [
            audited("SLACK_LINKED", "alice", "U0ALICE"),
            audited("SLACK_UNLINKED", "alice", "U0ALICE"),
        ]

    def test_links_removed_together_are_each_audited(self) -> None:
        links = [self.add("reviewer", "U0ALICE"), self.add("teammate", "U0BOB")]
        form = {"action": "delete_selected", "_selected_action": [x.pk for x in links]}
        answer = self.browser.post(LINKS, {**form, "post": "yes"})
        assert answer.status_code == 302 and not SlackLink.objects.exists()
        unlinked = [t for t in trail() if t[0] == "SLACK_UNLINKED"]
        assert sorted(unlinked, key=lambda t: t[2]["user"]) == [
            audited("SLACK_UNLINKED", "alice", "U0ALICE"),
            audited("SLACK_UNLINKED", "bob", "U0BOB"),
        ]

    def test_a_link_is_not_edited_in_place(self) -> None:
        link = self.add("reviewer", "U0ALICE")
        form = {"user": self.users["teammate"].pk, "slack_user_id": "U0MALLORY"}
        answer = self.browser.post(f"{LINKS}{link.pk}/change/", form)
        assert answer.status_code == 403
        link.refresh_from_db()
        assert (link.user, link.slack_user_id) == (self.users["reviewer"], "U0ALICE")
        assert self.browser.get(f"{LINKS}{link.pk}/change/").status_code == 200  # shown
        assert trail() == [audited("SLACK_LINKED", "alice", "U0ALICE")]

"""A request whose reviewing model can no longer answer is said failed by the sweeper
(agents.reviewing.verdicts.settle_unanswered), not left `asked` for good: its task was lost
(the broker away at the commit, a worker killed before it took it) or the worker making the
call stopped. The model's task is never run here, as if it were lost."""

from datetime import timedelta
from typing import Any

from django.test import Client

from agents import due, tasks
from agents.models import Event, ReviewCall, Suspension
from agents.reviewing import asking, verdicts
from agents.reviewing.setting import Setting
from tests.reviewing.test_reviewing_in_process import APPROVE_SMALL, agent, raised

REVIEWED = Event.Type.SUSPENSION_REVIEWED


def reviews(s: Suspension) -> list[dict[str, Any]]:
    return [e.payload for e in Event.objects.filter(suspension=s, type=REVIEWED).order_by("id")]


class UnansweredTestCase:
    def test_a_request_whose_task_was_lost_is_said_failed_once_no_answer_can_come(
        self, users: Any, load_agents: Any
    ) -> None:
        load_agents(agent(APPROVE_SMALL % {"extra": "timeout: 10,"}))
        [s] = raised()
        assert s.review["outcome"] == "asked"
        # A model is being asked: the clock keeps the sweeper going (agents.due).
        assert due.in_motion()

        # Within its timeout and the margin after it (10 + 30 s), the answer may yet come.
        assert verdicts.settle_unanswered(s.created_at + timedelta(seconds=39)) == 0
        assert Suspension.objects.get(pk=s.pk).review["outcome"] == "asked"

        assert verdicts.settle_unanswered(s.created_at + timedelta(seconds=41)) == 1
        s.refresh_from_db()
        assert s.status == "pending"  # left to people, as any failed review
        assert s.review == {
            "model": "scripted",
            "mode": "decide",
            "outcome": "failed",
            "error": verdicts.UNANSWERED,
        }
        [said] = reviews(s)
        assert (said["outcome"], said["error"]) == ("failed", verdicts.UNANSWERED)
        assert not due.in_motion()

        # Once: the next sweep finds nothing, and the task, should it come after all, asks
        # nothing and changes nothing.
        assert verdicts.settle_unanswered(s.created_at + timedelta(minutes=5)) == 0
        assert verdicts.review(s.pk) is False
        assert not ReviewCall.objects.filter(suspension=s).exists()
        assert len(reviews(s)) == 1

        # The card says so, in place of "no answer yet".
        client = Client()
        client.force_login(users["reviewer"])
        html = client.get(f"/fragments/suspensions/{s.pk}/card").content.decode()
        assert "No answer: left to people." in html
        assert "the worker asking the model stopped" in html
        assert "no answer yet" not in html

    def test_a_call_under_way_is_given_its_timeout_from_when_it_began(
        self, users: Any, load_agents: Any
    ) -> None:
        load_agents(agent(APPROVE_SMALL % {"extra": "timeout: 10,"}))
        [s] = raised()
        # A worker took the task five minutes late (a long queue) and is calling the model.
        began = s.created_at + timedelta(minutes=5)
        asking.charge(s, Setting.of(s.policy["review"]), began)

        assert verdicts.settle_unanswered(began + timedelta(seconds=39)) == 0
        # Its worker stopped during the call: no answer was recorded by then.
        assert verdicts.settle_unanswered(began + timedelta(seconds=41)) == 1
        assert Suspension.objects.get(pk=s.pk).review["outcome"] == "failed"

    def test_an_answer_or_a_decision_that_came_first_stands(
        self, users: Any, load_agents: Any
    ) -> None:
        load_agents(agent(APPROVE_SMALL % {"extra": "timeout: 10,"}, amounts=(42, 500)))
        small, large = raised()
        # The small one's model answered (it approved it); the large one a person rejected.
        assert verdicts.review(small.pk) is True
        reviewer = Client()
        reviewer.force_login(users["reviewer"])
        path = f"/api/threads/{large.thread_id}/suspensions/{large.pk}/resume"
        answer = reviewer.post(
            path, {"approved": False, "reason": "No."}, content_type="application/json"
        )
        assert answer.status_code == 202, answer.content

        assert verdicts.settle_unanswered(large.created_at + timedelta(minutes=5)) == 0
        small.refresh_from_db()
        large.refresh_from_db()
        assert (small.status, small.review["outcome"]) == ("approved", "decided")
        assert (large.status, large.review["outcome"]) == ("rejected", "asked")

    def test_the_sweeper_settles_them(self, users: Any, load_agents: Any) -> None:
        load_agents(agent(APPROVE_SMALL % {"extra": "timeout: 10,"}))
        [s] = raised()
        assert tasks.sweep()["reviews_unanswered"] == 0
        Suspension.objects.filter(pk=s.pk).update(created_at=s.created_at - timedelta(minutes=2))
        assert tasks.sweep()["reviews_unanswered"] == 1
        assert Suspension.objects.get(pk=s.pk).review["outcome"] == "failed"

"""Slack: reviewers approve where they already are; a channel of its own (ARCHITECTURE.md)."""

from django.apps import AppConfig


class SlackApprovalsConfig(AppConfig):
    name = "slack_approvals"
    verbose_name = "Slack approvals"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from agents import events
        from agents.agentfiles import sections_loaded
        from slack_approvals import fanout, routes

        sections_loaded.connect(routes.store_routes, dispatch_uid="slack_approvals.routes")
        events.committed.connect(fanout.nudge, dispatch_uid="slack_approvals.fanout.nudge")

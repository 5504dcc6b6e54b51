"""The demo's one table: what its tools did."""

from django.db import models

from agents.models import Thread


class DemoAction(models.Model):
    """What the demo tools did, so a person can see an approved action happen (and a rejected
    one not)."""

    thread = models.ForeignKey(Thread, models.SET_NULL, null=True, blank=True, related_name="+")
    tool = models.CharField(max_length=100)
    # The tool call's idempotency key (its tool_use id): a tool killed mid-run and started
    # again records its effect once (demo.tools).
    idempotency_key = models.CharField(max_length=200, unique=True, null=True, blank=True)
    arguments = models.JSONField(default=dict)
    summary = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "agents_demoaction"  # created by the agents app, where it began
        ordering = ["-id"]

    def __str__(self) -> str:
        return self.summary

"""What every channel's delivery tables share (abstract: each channel keeps its own tables):
the fan-out's cursor and a row of the attempt log."""

from django.db import models


class Cursor(models.Model):
    """How far a channel's fan-out (agents.delivery.fanout) has read the Event table: every
    event up to `position` has its deliveries."""

    name = models.CharField(max_length=50, primary_key=True)
    position = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.name} at {self.position}"


class Attempt(models.Model):
    """One attempt at a delivery, as the log shows it (agents.delivery.outbox.Outbox.log); the
    channel's model adds the foreign key to its delivery and what else its transport says."""

    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    succeeded = models.BooleanField(default=False)
    error = models.TextField(blank=True)

    class Meta:
        abstract = True
        ordering = ["id"]

    def __str__(self) -> str:
        return f"attempt {self.number} ({'succeeded' if self.succeeded else 'failed'})"

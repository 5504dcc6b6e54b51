"""Who looks at which pending suspension, and who has claimed one: socket state, not audit.

Rows here belong to open sockets and go with them; they are never Events. They live in the
database rather than in a process's memory because a reviewer's two pages may be served by
two daphne processes (with Redis, or `WEB_PROCESSES` > 1 on SQLite), and every process must
see the same claims. A process that dies leaves its rows behind: each process refreshes
`seen_at` on its open sockets' rows every presence.actions.BEAT seconds, and rows older than
presence.actions.STALE count for nothing and are deleted by whichever process sweeps next.
"""

from django.conf import settings
from django.db import models

from agents.models import Suspension


class Viewer(models.Model):
    """One open socket looking at one pending suspension."""

    socket = models.UUIDField()
    process = models.UUIDField(help_text="The server process holding the socket")
    suspension = models.ForeignKey(Suspension, models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="+")
    name = models.CharField(max_length=150, help_text="The name shown to the others")
    seen_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["socket", "suspension"], name="one_view_per_socket")
        ]
        indexes = [
            # presence.board.read_state: the viewers of the suspensions a process's sockets see.
            models.Index(fields=["suspension"], name="viewer_suspension"),
            # presence.actions.beat: a process refreshes its own rows.
            models.Index(fields=["process"], name="viewer_process"),
        ]

    def __str__(self) -> str:
        return f"{self.name} on {self.suspension_id}"


class Claim(models.Model):
    """A reviewer saying "I am reviewing this": one per suspension, lapsing at `expires_at`,
    or when the socket that claimed it closes. Others may still decide."""

    suspension = models.OneToOneField(
        Suspension, models.CASCADE, primary_key=True, related_name="+"
    )
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="+")
    name = models.CharField(max_length=150, help_text="The name shown to the others")
    socket = models.UUIDField(help_text="The socket that claimed it; its closing releases it")
    process = models.UUIDField(help_text="The server process holding that socket")
    claimed_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    seen_at = models.DateTimeField()

    class Meta:
        indexes = [
            # presence.actions.leave and beat: a socket's claims, a process's claims.
            models.Index(fields=["socket"], name="claim_socket"),
            models.Index(fields=["process"], name="claim_process"),
        ]

    def __str__(self) -> str:
        return f"{self.name} claims {self.suspension_id}"


class CardView(models.Model):
    """When a reviewer's page first had a request's card on screen (the page's "view",
    presence.actions.look), kept after the socket closes: the insights page counts how long a
    reviewer looked before deciding (metrics.reviewers). Not audit: a look is not a decision."""

    suspension = models.ForeignKey(Suspension, models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="+")
    first_shown_at = models.DateTimeField()

    class Meta:
        constraints = [
            # The first look counts: a later one is a conflict, ignored (presence.actions.look).
            models.UniqueConstraint(fields=["suspension", "user"], name="one_card_view_per_user")
        ]

    def __str__(self) -> str:
        return f"{self.user_id} saw {self.suspension_id} at {self.first_shown_at}"

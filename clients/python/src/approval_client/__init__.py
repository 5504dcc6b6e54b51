"""Client for the approval gateway's external requests: ask people before an agent acts."""

from approval_client.client import (
    AsyncGateway,
    Gateway,
    GatewayError,
    Rejected,
    Request,
    Retry,
    StillPending,
    TimedOut,
)
from approval_client.decorators import ask_human, ask_human_async, require_approval

__all__ = [
    "AsyncGateway",
    "Gateway",
    "GatewayError",
    "Rejected",
    "Request",
    "Retry",
    "StillPending",
    "TimedOut",
    "ask_human",
    "ask_human_async",
    "require_approval",
]

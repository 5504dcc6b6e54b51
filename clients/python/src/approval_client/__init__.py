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
from approval_client.receipts import ReceiptInvalid

# A decided request: `Decision.receipt`, `Decision.verify_receipt(jwks)`.
Decision = Request

__all__ = [
    "AsyncGateway",
    "Gateway",
    "Decision",
    "GatewayError",
    "ReceiptInvalid",
    "Rejected",
    "Request",
    "Retry",
    "StillPending",
    "TimedOut",
    "ask_human",
    "ask_human_async",
    "require_approval",
]

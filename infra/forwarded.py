"""The client's address behind trusted proxies: X-Forwarded-For, believed only from them.

Daphne's own --proxy-headers believes the header from any peer, so a client that reaches the
server directly could name any address (and the login lockout, keyed on the address, would
count its guesses against someone else). Here the header is read from the right, past the
trusted proxies' own entries, as uvicorn's --forwarded-allow-ips does.
"""

from collections.abc import Iterable
from ipaddress import IPv4Network, IPv6Network, ip_address, ip_network
from typing import Any

Network = IPv4Network | IPv6Network


def networks(specs: Iterable[str]) -> list[Network]:
    """Addresses or networks (`10.0.0.0/8`, `::1`) as networks."""
    return [ip_network(spec, strict=False) for spec in specs]


def _trusted(address: str, trusted: list[Network]) -> bool:
    try:
        ip = ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in trusted)


def client_address(peer: str, forwarded_for: str, trusted: list[Network]) -> str:
    """The client's address: the peer's, unless the peer is a trusted proxy; then the rightmost
    X-Forwarded-For entry that is not one (each proxy appends the address it was reached from)."""
    if not _trusted(peer, trusted):
        return peer
    for entry in reversed([e.strip() for e in forwarded_for.split(",") if e.strip()]):
        if not _trusted(entry, trusted):
            return entry
    return peer


class ProxyHeaders:
    """ASGI middleware: the scope's client becomes `client_address` for HTTP and sockets."""

    def __init__(self, app: Any, trusted: list[Network]) -> None:
        self.app = app
        self.trusted = trusted

    async def __call__(self, scope, receive, send) -> None:  # type: ignore[no-untyped-def]  # ASGI's three callables, untyped as in asgiref
        if scope["type"] in ("http", "websocket") and scope.get("client"):
            header = b",".join(v for k, v in scope["headers"] if k == b"x-forwarded-for")
            peer = scope["client"][0]
            address = client_address(peer, header.decode("latin-1"), self.trusted)
            if address != peer:
                scope = {**scope, "client": (address, 0)}
        await self.app(scope, receive, send)

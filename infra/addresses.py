"""Where webhooks may go: a URL whose host resolves to a private, loopback, link-local,
multicast or otherwise non-public address is refused, unless WEBHOOKS_ALLOW_PRIVATE is set.

The check runs when a subscription is made or changed (webhooks.api, webhooks.admin) and again
at every delivery (webhooks.outbox), which then connects to the address it checked, so a name
that resolves elsewhere a moment later (DNS rebinding) cannot send it inside.
"""

import ipaddress
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, urlsplit, urlunsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class Refused(Exception):
    """A URL that webhooks may not be sent to; the message says why."""


@dataclass(frozen=True)
class Target:
    """A checked URL: where to connect (the address, in the URL) and whom to name (Host, SNI)."""

    url: str
    host_header: str
    sni_hostname: str | None


def kind(address: Address) -> str | None:
    """What makes `address` off limits, or None for a public one."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    for name in ("loopback", "link_local", "multicast", "unspecified", "private", "reserved"):
        if getattr(address, f"is_{name}"):
            return name.replace("_", "-")
    if not address.is_global:
        return "non-public"
    return None


def _parts(url: str) -> SplitResult:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as e:
        raise Refused(f"The URL is not valid: {e}.") from e
    if parts.scheme not in ("http", "https"):
        raise Refused("Use an http:// or https:// URL.")
    if not parts.hostname:
        raise Refused("The URL has no host.")
    if parts.username is not None or parts.password is not None:
        raise Refused("Put no credentials in the URL.")
    return parts


def resolve(url: str) -> tuple[SplitResult, list[Address]]:
    """The URL's parts and every address its host resolves to, each allowed (or Refused)."""
    parts = _parts(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as e:
        raise Refused(f"{parts.hostname} does not resolve ({e}).") from e
    addresses = list(
        dict.fromkeys(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos)
    )
    if not settings.WEBHOOKS_ALLOW_PRIVATE:
        for address in addresses:
            if (why := kind(address)) is not None:
                raise Refused(
                    f"{parts.hostname} resolves to {address}, a {why} address; webhooks go to "
                    "public addresses only (WEBHOOKS_ALLOW_PRIVATE allows others)."
                )
    if not addresses:
        raise Refused(f"{parts.hostname} does not resolve.")
    return parts, addresses


def check(url: str) -> None:
    """Refuse `url` now if it cannot take webhooks (subscribe time)."""
    resolve(url)


def target(url: str) -> Target:
    """The URL with its host replaced by the first address it resolves to, after the check."""
    parts, addresses = resolve(url)
    address = addresses[0]
    literal = f"[{address}]" if address.version == 6 else str(address)
    netloc = f"{literal}:{parts.port}" if parts.port else literal
    pinned = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
    host = parts.hostname.encode("idna").decode() if not _is_ip(parts.hostname) else literal
    host_header = f"{host}:{parts.port}" if parts.port else host
    sni = host if parts.scheme == "https" and not _is_ip(parts.hostname) else None
    return Target(url=pinned, host_header=host_header, sni_hostname=sni)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def host_of(url: str) -> str:
    """The URL's host alone, for logs and events (a path or query may hold a secret)."""
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


def url_error(url: Any) -> str | None:
    """Why `url` cannot receive deliveries (a webhook's or an A2A push config's), or None."""
    if not isinstance(url, str) or not url:
        return "An http:// or https:// URL."
    if len(url) > 2000:
        return "At most 2000 characters."
    try:
        URLValidator(schemes=["http", "https"])(url)
    except ValidationError:
        return "An http:// or https:// URL."
    try:
        check(url)
    except Refused as e:
        return str(e)
    return None

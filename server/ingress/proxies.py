"""The client address behind trusted reverse proxies (`gateway.trustedProxies`).

Without trusted proxies the client is the socket peer and forwarded headers are ignored (the
HTTP server's own proxy-header handling is off). With them, `TrustedProxies` wraps the ASGI app:
when the socket peer is one of the configured addresses or networks, the client becomes the
right-most address in `X-Forwarded-For` that is not itself a trusted proxy (or, without that
header, the same in `Forwarded`'s `for=` values). Hops left of it are the client's to write and
are never believed. An unreadable hop ends the walk at the last trusted address. Everything
behind the app (the auth lock-out, the request log, the admin API) sees the resulting
`scope["client"]`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any

from ...engine.errors import ConfigError, ConfigIssue

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(entries: Sequence[str], where: str = "gateway.trustedProxies") -> list[Network]:
    """Addresses and CIDRs as networks; a `ConfigError` naming the entry otherwise."""
    out: list[Network] = []
    for i, entry in enumerate(entries):
        try:
            out.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            raise ConfigError(
                [ConfigIssue(f"{where}[{i}]", f"not an IP address or CIDR: {entry!r}")]
            ) from None
    return out


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    text = text.strip().strip('"')
    if text.startswith("["):  # Forwarded: "[2001:db8::1]:443"
        text = text[1:].split("]", 1)[0]
    elif text.count(":") == 1:  # "192.0.2.1:443"
        text = text.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _forwarded_for(value: str) -> list[str]:
    hops: list[str] = []
    for element in value.split(","):
        for pair in element.split(";"):
            key, _, val = pair.partition("=")
            if key.strip().lower() == "for":
                hops.append(val)
    return hops


class TrustedProxies:
    """ASGI middleware that sets `scope["client"]` from forwarded headers of trusted peers."""

    def __init__(self, app: Any, networks: Sequence[Network]) -> None:
        self._app = app
        self._networks = tuple(networks)

    def trusted(self, address: Any) -> bool:
        return address is not None and any(address in net for net in self._networks)

    def client(self, peer: str, headers: list[tuple[bytes, bytes]]) -> str:
        """The client address for a request from `peer` (see the module docstring)."""
        if not self.trusted(_address(peer)):
            return peer
        xff = [v for k, v in headers if k == b"x-forwarded-for"]
        if xff:
            hops = ",".join(v.decode("latin-1") for v in xff).split(",")
        else:
            fwd = [v for k, v in headers if k == b"forwarded"]
            hops = _forwarded_for(",".join(v.decode("latin-1") for v in fwd))
        client = peer
        for hop in reversed(hops):
            address = _address(hop)
            if address is None:
                break
            client = str(address)
            if not self.trusted(address):
                break
        return client

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        peer = scope.get("client")
        if scope["type"] in ("http", "websocket") and peer:
            client = self.client(peer[0], scope["headers"])
            if client != peer[0]:
                scope = {**scope, "client": (client, 0)}
        await self._app(scope, receive, send)

"""Callback URLs: which URL a mapping's callback may be sent to, judged without the network.

A mapping's `callback.url` comes from the configuration and is trusted as written. A URL taken
from the payload (`callback.urlFrom`) is hostile input: it is used only when it is an absolute
http(s) URL that falls under one of the mapping's `callback.allow` prefixes, compared as parsed
URLs (scheme, host and port equal, the path under the prefix's path on a `/` boundary; never a
string prefix, so `https://ci.example.com.evil.net/` is not under `https://ci.example.com`), and
carries no credentials. A literal IP address that is loopback, private, link-local or otherwise
not global is refused here too, unless its host is allowed by name (`callback.allowHosts`); names
are resolved (and the addresses checked again) when the callback is sent
(`hookwise.server.channels.webhook`).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import SplitResult, urlsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _parts(url: str) -> SplitResult | None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return parts


def _port(parts: SplitResult) -> int:
    return parts.port or _DEFAULT_PORTS[parts.scheme]


def under(url: str, prefix: str) -> bool:
    """`url` is `prefix` or below it, compared as parsed URLs."""
    u, p = _parts(url), _parts(prefix)
    if u is None or p is None:
        return False
    if (u.scheme, u.hostname, _port(u)) != (p.scheme, p.hostname, _port(p)):
        return False
    base = p.path.rstrip("/")
    return u.path == base or u.path.startswith(base + "/") or (not base and not u.path)


def not_global(address: str) -> bool:
    """An IP address a callback must not reach: loopback, private, link-local, reserved, ..."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not ip.is_global or ip.is_multicast


def refuse_url(url: object, allow: tuple[str, ...], allow_hosts: tuple[str, ...]) -> str | None:
    """None when a URL from a payload may be called back, else a sentence saying why not."""
    if not isinstance(url, str) or not url.strip():
        return "the callback URL is missing or not a string"
    parts = _parts(url.strip())
    if parts is None:
        return "the callback URL is not an absolute http:// or https:// URL"
    if parts.username is not None or parts.password is not None:
        return "the callback URL must not carry credentials"
    if not any(under(url.strip(), prefix) for prefix in allow):
        return "the callback URL is not under any of the mapping's callback.allow prefixes"
    host = parts.hostname or ""
    if host in allow_hosts:
        return None
    try:
        literal = not_global(host)
    except ValueError:
        literal = host == "localhost" or host.endswith(".localhost")
    if literal:
        return "the callback URL names a loopback, private or link-local address"
    return None

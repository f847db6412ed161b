"""The engine's view of one inbound hook request: everything a rule may look at, nothing more.

The server builds it after authentication and body parsing; the engine reads no clock, so `now`
is passed in.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import attrs

#: the hook paths the service answers itself; every other path is a mapped hook
BUILT_IN_HOOKS = frozenset({"wake", "agent"})


@attrs.frozen
class InboundRequest:
    """A parsed hook request.

    `path` is the sub-path after the hook base path with slashes trimmed (`github`, `ingest/x`);
    `payload` is the parsed body: a JSON object, or an array (a mapped hook takes both);
    `headers` have lower-cased names; `raw_body` is the body exactly as received (for signature
    checks and transforms that need it); `url` is the full request URL.
    """

    path: str
    payload: dict[str, Any] | list[Any]
    headers: Mapping[str, str] = attrs.field(factory=dict)
    query: Mapping[str, str] = attrs.field(factory=dict)
    raw_body: bytes = b""
    now: datetime | None = None
    # The URL as requested (scheme, host, path, query), for schemes that sign it (Twilio, Square).
    url: str = ""
    # Documents the server fetched for the door's check, by URL (a provider's public keys, its
    # certificate): the engine fetches nothing itself.
    fetched: Mapping[str, bytes] = attrs.field(factory=dict, repr=False)

"""The one client that fetches what a door's check needs from the outside: a provider's public
keys (Google's JWKS for Pub/Sub push tokens, SNS's signing certificate, Plaid's key, which is
asked for with a POST of the block's API credentials: a `KeyRequest`), and visits the URL that
confirms an SNS subscription once its message checked. Bounded, cached and allowlisted.

- Allowlisted: a scheme names the URLs a request needs (`Scheme.fetch`, which refuses any URL
  the scheme does not allow); this client fetches only `https://` URLs, or `http://` on the
  loopback interface (a test's server, a local mirror named by the operator's `keysUrl`), and
  follows no redirect.
- Bounded: one request at a time per URL (concurrent checks wait for the same fetch), a
  timeout of `TIMEOUT` seconds, bodies of at most `MAX_BYTES`, at most `MAX_ENTRIES` URLs
  remembered.
- Cached: a document is kept for its `Cache-Control: max-age` (between `MIN_TTL` and
  `MAX_TTL`; `DEFAULT_TTL` without one); a failure is remembered for `FAILURE_TTL`, so a flood
  of requests cannot become a flood of fetches. A failure answers `503 keys_unavailable`: the
  provider retries later, as it does on any 5xx.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Callable

import attrs
import httpx

from ...engine.errors import RequestError
from ...engine.request import InboundRequest
from ...engine.signatures import SignatureError, Verifier
from ...engine.signatures.core import KeyRequest

log = logging.getLogger("hookwise.fetch")

TIMEOUT = 5.0
MAX_BYTES = 256 * 1024
MAX_ENTRIES = 64
DEFAULT_TTL = 3600.0
MIN_TTL = 60.0
MAX_TTL = 6 * 3600.0
FAILURE_TTL = 30.0
_LOOPBACK = re.compile(r"^http://(127\.0\.0\.1|localhost|\[::1\])(:\d+)?/")
_MAX_AGE = re.compile(r"max-age=(\d+)")


class _Failed(Exception):
    pass


@attrs.frozen
class _Entry:
    body: bytes | None  # None: the fetch failed
    until: float
    why: str = ""


class KeyFetcher:
    """Fetches and caches the documents doors need (see the module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cache: OrderedDict[str, _Entry] = OrderedDict()
        self._pending: dict[str, asyncio.Future[_Entry]] = {}

    async def for_request(self, verifier: Verifier, request: InboundRequest) -> InboundRequest:
        """`request` with what its check needs fetched (itself when the scheme needs nothing);
        `RequestError` 401 for a URL the scheme refuses, 503 when a document is unavailable."""
        wanted = verifier.scheme.fetch
        if wanted is None:
            return request
        try:
            urls = wanted(verifier, request)
        except SignatureError as exc:
            raise RequestError(401, "invalid_signature", f"{verifier.where}: {exc}") from None
        fetched = dict(request.fetched)
        for item in urls:
            name = item if isinstance(item, str) else item.name
            if name not in fetched:
                fetched[name] = await self.get(item)
        return attrs.evolve(request, fetched=fetched)

    async def get(self, wanted: str | KeyRequest) -> bytes:
        """The document at a URL (or a `KeyRequest`'s answer), from the cache when fresh."""
        name = wanted if isinstance(wanted, str) else wanted.name
        entry = self._cache.get(name)
        if entry is None or entry.until <= self._clock():
            pending = self._pending.get(name)
            if pending is None:
                pending = self._pending[name] = asyncio.ensure_future(self._fetch(wanted))
                pending.add_done_callback(lambda _: self._pending.pop(name, None))
            entry = await asyncio.shield(pending)
        if entry.body is None:
            raise RequestError(
                503, "keys_unavailable", f"the provider's keys could not be fetched: {entry.why}"
            )
        return entry.body

    async def visit(self, url: str) -> None:
        """GET `url` once, uncached (SNS's SubscribeURL); `RequestError` 503 when it fails, so
        that the provider sends the handshake again."""
        try:
            await self._download(url)
        except _Failed as exc:
            log.warning("visiting %s failed: %s", url.split("?", 1)[0], exc)
            raise RequestError(
                503, "handshake_unconfirmed", f"the subscription could not be confirmed: {exc}"
            ) from None
        log.info("visited %s to confirm a subscription", url.split("?", 1)[0])

    async def _fetch(self, wanted: str | KeyRequest) -> _Entry:
        now = self._clock()
        url, name = (wanted, wanted) if isinstance(wanted, str) else (wanted.url, wanted.name)
        try:
            posted = None if isinstance(wanted, str) else wanted.body
            body, ttl = await self._download(url, posted)
            entry = _Entry(body, now + ttl)
        except _Failed as exc:
            log.warning("fetching %s failed: %s", url, exc)
            entry = _Entry(None, now + FAILURE_TTL, str(exc))
        self._cache[name] = entry
        self._cache.move_to_end(name)
        while len(self._cache) > MAX_ENTRIES:
            self._cache.popitem(last=False)
        return entry

    async def _download(self, url: str, posted: bytes | None = None) -> tuple[bytes, float]:
        if not (url.startswith("https://") or _LOOPBACK.match(url)):
            raise _Failed("only https:// URLs are fetched")
        method, headers = "GET", {"Accept": "application/json"}
        if posted is not None:
            method, headers = "POST", {**headers, "Content-Type": "application/json"}
        try:
            async with (
                httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=False) as client,
                client.stream(method, url, headers=headers, content=posted) as response,
            ):
                if response.status_code != 200:
                    raise _Failed(f"HTTP {response.status_code}")
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > MAX_BYTES:
                        raise _Failed(f"more than {MAX_BYTES} bytes")
                    chunks.append(chunk)
                cache_control = response.headers.get("cache-control", "")
        except httpx.HTTPError as exc:
            raise _Failed(type(exc).__name__) from None
        found = _MAX_AGE.search(cache_control)
        ttl = float(found.group(1)) if found else DEFAULT_TTL
        return b"".join(chunks), min(MAX_TTL, max(MIN_TTL, ttl))

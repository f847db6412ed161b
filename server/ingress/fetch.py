"""The one client that fetches what a door's check needs from the outside: a provider's public
keys (Google's JWKS for Pub/Sub push tokens, SNS's signing certificate, Plaid's key, which is
asked for with a POST of the block's API credentials: a `KeyRequest`), and visits the URL that
confirms an SNS subscription once its message checked. Bounded, cached and allowlisted.

- Allowlisted: a scheme names the URLs a request needs (`Scheme.fetch`, which refuses any URL
  the scheme does not allow); this client fetches only `https://` URLs, or `http://` on the
  loopback interface (a test's server, a local mirror named by the operator's `keysUrl`), and
  follows no redirect.
- Bounded: one request at a time per URL (concurrent checks wait for the same fetch), the
  whole fetch (connect, headers and every byte of the body) within `TIMEOUT` seconds, so a server
  that dribbles a byte a second cannot hold it, bodies of at most `MAX_BYTES`, at most
  `MAX_ENTRIES` URLs remembered. New fetches are budgeted: at most `HOST_FETCHES` per host and
  `TOTAL_FETCHES` in all per `FETCH_WINDOW` seconds (a token bucket each), so messages naming
  ever new certificate URLs under an allowed host cannot become a flood of outbound requests;
  over budget, the request is answered `503 keys_unavailable` (saying when to try again),
  nothing is fetched, and one warning per host and window is logged.
- Cached: a document is kept for its `Cache-Control: max-age` (between `MIN_TTL` and
  `MAX_TTL`; `DEFAULT_TTL` without one); a failure is remembered for `FAILURE_TTL`, so a flood
  of requests cannot become a flood of fetches. A failure answers `503 keys_unavailable`: the
  provider retries later, as it does on any 5xx.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from urllib.parse import urlsplit

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
#: new fetches allowed per host, and in all, per `FETCH_WINDOW` seconds
HOST_FETCHES = 10
TOTAL_FETCHES = 30
FETCH_WINDOW = 60.0
_LOOPBACK = re.compile(r"^http://(127\.0\.0\.1|localhost|\[::1\])(:\d+)?/")
_MAX_AGE = re.compile(r"max-age=(\d+)")


class _Failed(Exception):
    pass


def _host(url: str) -> str:
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


class _Budget:
    """Token buckets of new fetches: one per host and one for all hosts."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._hosts: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._total = (float(TOTAL_FETCHES), clock())
        self._warned: dict[str, float] = {}

    def _level(self, state: tuple[float, float], most: int, now: float) -> float:
        tokens, at = state
        return min(float(most), tokens + (now - at) * most / FETCH_WINDOW)

    def take(self, host: str) -> float:
        """0 when a fetch from `host` may start (and is counted); else seconds to wait."""
        now = self._clock()
        here = self._level(self._hosts.get(host, (float(HOST_FETCHES), now)), HOST_FETCHES, now)
        total = self._level(self._total, TOTAL_FETCHES, now)
        if here < 1 or total < 1:
            wait = max((1 - here) * FETCH_WINDOW / HOST_FETCHES if here < 1 else 0.0,
                       (1 - total) * FETCH_WINDOW / TOTAL_FETCHES if total < 1 else 0.0)  # fmt: skip
            if self._warned.get(host, -FETCH_WINDOW) <= now - FETCH_WINDOW:
                self._warned[host] = now
                log.warning(
                    "fetch budget spent (%d per host, %d in all, per %.0f s): %s not fetched",
                    HOST_FETCHES, TOTAL_FETCHES, FETCH_WINDOW, host,
                )  # fmt: skip
            return wait
        self._hosts[host] = (here - 1, now)
        self._hosts.move_to_end(host)
        while len(self._hosts) > MAX_ENTRIES:
            self._hosts.popitem(last=False)
        self._total = (total - 1, now)
        return 0.0


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
        self._budget = _Budget(clock)

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
                url = wanted if isinstance(wanted, str) else wanted.url
                wait = self._budget.take(_host(url))
                if wait > 0:
                    raise RequestError(
                        503,
                        "keys_unavailable",
                        "the provider's keys could not be fetched: too many new fetches from"
                        f" this host; try again in {math.ceil(wait)} s",
                    )
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
                asyncio.timeout(TIMEOUT),
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
        except TimeoutError:
            raise _Failed(f"not fetched within {TIMEOUT:g} s") from None
        except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
            raise _Failed(type(exc).__name__) from None
        found = _MAX_AGE.search(cache_control)
        ttl = float(found.group(1)) if found else DEFAULT_TTL
        return b"".join(chunks), min(MAX_TTL, max(MIN_TTL, ttl))

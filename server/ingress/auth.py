"""Hook authentication: where the token may be, constant-time comparison, and lock-out.

The token may come in exactly one of three ways: `Authorization: Bearer <token>`, the
`x-service-token` header (or its alias `x-openclaw-token`, the peer's name for it), or the
`token` query parameter. A request that carries it in more than
one way is refused, so that a proxy that adds one cannot mask another. Comparison is over SHA-256
digests with `hmac.compare_digest`, so neither the token's content nor its length leaks through
timing. `AuthThrottle` locks out a client address after repeated failures; a correct token still
passes during a lock-out and clears the record.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from urllib.parse import parse_qsl

import attrs

from ..store.base import Store
from ..store.bounded import within_store_wait

TOKEN_HEADER = b"x-service-token"
TOKEN_HEADERS = (TOKEN_HEADER, b"x-openclaw-token")


def _digest(value: str | bytes) -> bytes:
    if isinstance(value, str):
        value = value.encode("utf-8", "surrogateescape")
    return hashlib.sha256(value).digest()


class TokenCheck:
    """Checks a presented token against the configured one in constant time."""

    __slots__ = ("_digest",)

    def __init__(self, token: str) -> None:
        self._digest = _digest(token)

    def matches(self, presented: str | bytes) -> bool:
        return hmac.compare_digest(_digest(presented), self._digest)


@attrs.frozen
class Presented:
    """What a request presented: the token, or why there is none to check."""

    token: bytes | None
    problem: str | None = None


def presented_token(headers: list[tuple[bytes, bytes]], query_string: bytes) -> Presented:
    """Find the token in ASGI headers and the raw query string (exactly one way allowed)."""
    found: list[bytes] = []
    for name, value in headers:
        if name == b"authorization":
            scheme, _, rest = value.partition(b" ")
            if scheme.lower() != b"bearer" or not rest.strip():
                return Presented(None, "the Authorization header must be 'Bearer <token>'")
            found.append(rest.strip())
        elif name in TOKEN_HEADERS:
            found.append(value.strip())
    if query_string and b"token=" in query_string:
        # latin-1 both ways: a percent-escape stands for one byte, whatever it is (UTF-8 or not)
        query = query_string.decode("latin-1")
        for key, text in parse_qsl(query, keep_blank_values=True, encoding="latin-1"):
            if key == "token":
                found.append(text.encode("latin-1"))
    if not found:
        return Presented(None, "a hook token is required")
    if len(found) > 1:
        return Presented(None, "send the hook token in exactly one way")
    return Presented(found[0])


def client_key(host: str | None) -> str:
    """IPv4 and IPv4-mapped IPv6 addresses share a bucket."""
    if not host:
        return "?"
    if host.startswith("::ffff:") and "." in host:
        return host[7:]
    return host


class AuthThrottle:
    """Counts authentication failures per client address and locks an address out (one process).

    `max_failures` failures within `window` seconds lock the address for `lockout` seconds.
    Memory is bounded: the least recently seen addresses are forgotten beyond `max_clients`.
    The async methods are the interface the hook endpoint uses (shared with `SharedAuthThrottle`).
    """

    def __init__(
        self,
        *,
        max_failures: int,
        window: float,
        lockout: float,
        max_clients: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self.max_failures = max_failures
        self.window = window
        self.lockout = lockout
        self._max_clients = max_clients
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._locked_until: dict[str, float] = {}

    def retry_after(self, client: str, now: float) -> float | None:
        """Seconds until the lock-out of `client` ends, or None when it is not locked out."""
        until = self._locked_until.get(client)
        if until is None:
            return None
        if until <= now:
            del self._locked_until[client]
            return None
        return until - now

    def failure(self, client: str, now: float) -> None:
        if self.max_failures <= 0:
            return
        times = self._failures.get(client)
        if times is None:
            times = self._failures[client] = deque()
            if len(self._failures) > self._max_clients:
                old, _ = self._failures.popitem(last=False)
                self._locked_until.pop(old, None)
        else:
            self._failures.move_to_end(client)
        times.append(now)
        while times and times[0] <= now - self.window:
            times.popleft()
        if len(times) >= self.max_failures:
            self._locked_until[client] = now + self.lockout
            times.clear()

    def success(self, client: str) -> None:
        if self._failures.pop(client, None) is not None or client in self._locked_until:
            self._locked_until.pop(client, None)

    async def locked_for(self, client: str) -> float | None:
        return self.retry_after(client, self._clock())

    async def record_failure(self, client: str) -> None:
        self.failure(client, self._clock())

    async def record_success(self, client: str) -> None:
        self.success(client)


class SharedAuthThrottle:
    """The same lock-out, kept in the store so that every gateway process sees it.

    Failures and lock-outs are written to the store; a success clears the client's record only
    when this process has seen a failure from it recently, so the hot path (a correct token)
    costs no database round trip.
    """

    def __init__(
        self,
        store: Store,
        *,
        max_failures: int,
        window: float,
        lockout: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self.max_failures = max_failures
        self.window = window
        self.lockout = lockout
        self._clock = clock
        self._seen: OrderedDict[str, float] = OrderedDict()

    async def locked_for(self, client: str) -> float | None:
        now = self._clock()
        until = await within_store_wait(self._store.auth_locked_until(client, now=now))
        return None if until is None else until - now

    async def record_failure(self, client: str) -> None:
        if self.max_failures <= 0:
            return
        now = self._clock()
        self._seen[client] = now
        self._seen.move_to_end(client)
        while len(self._seen) > 10_000:
            self._seen.popitem(last=False)
        await within_store_wait(
            self._store.auth_failure(
                client,
                now=now,
                window=self.window,
                max_failures=self.max_failures,
                lockout=self.lockout,
            )
        )

    async def record_success(self, client: str) -> None:
        seen = self._seen.pop(client, None)
        if seen is not None and seen > self._clock() - max(self.window, self.lockout):
            await within_store_wait(self._store.auth_success(client))


def lockout_throttle(
    store: Store | None, *, max_failures: int, window: float, lockout: float
) -> AuthThrottle | SharedAuthThrottle:
    """A lock-out kept in `store`, where every process sharing it sees it; without a store, in
    this process."""
    if store is not None:
        return SharedAuthThrottle(store, max_failures=max_failures, window=window, lockout=lockout)
    return AuthThrottle(max_failures=max_failures, window=window, lockout=lockout)

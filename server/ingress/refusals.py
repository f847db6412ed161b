"""The HTTP status of each of the engine's refusals: chosen here, in ingress, not in the engine.

The engine refuses a request with a typed `Refusal` (a stable code, a sentence, the field, the
rule) and knows nothing of HTTP. `as_error` turns one into the server's `RequestError` with the
status its code is answered with: a payload the rules or the policy refuse is 400, a request no
rule matched 404, a bad provider signature 401, a provider's handshake with the wrong verify token
403 (a malformed handshake is 400), a batch over `forEachMax` 413, and a transform that failed 500
(503 when the transform workers are all busy, 504 when it ran out of time).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ...engine.errors import Refusal, RequestError

#: the codes not answered 400
STATUS: Mapping[str, int] = MappingProxyType(
    {
        "not_found": 404,
        "invalid_signature": 401,
        "invalid_verify_token": 403,
        "for_each_max_exceeded": 413,
        "transform_failed": 500,
        "transform_busy": 503,
        "transform_timeout": 504,
    }
)


def status_of(code: str) -> int:
    """The HTTP status a refusal with `code` is answered with (400 unless `STATUS` says)."""
    return STATUS.get(code, 400)


def as_error(refusal: Refusal) -> RequestError:
    """The engine's refusal as the server answers it (its cause kept: a transform's detail)."""
    error = RequestError(
        status_of(refusal.code), refusal.code, refusal.message, refusal.field, refusal.rule_id
    )
    error.__cause__ = refusal.__cause__
    return error

"""HTTP plumbing shared by the HTTP providers: one POST within a deadline, failures as errors.

`post_json` bounds an attempt by the provider's per-request timeout and by the call's deadline.
Past the deadline it raises `ProviderTimeout`; a per-request timeout or a connection failure is
a retryable `ProviderError`. The response is returned whatever its status: the protocol modules
read their own error bodies. `http_error` builds the error for a non-2xx answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping

import httpx

from ... import metrics
from .base import ProviderError, ProviderTimeout
from .retry import parse_retry_after

_MAX_MESSAGE_CHARS = 500


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """`text` without any of the secrets, each replaced by `***`."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


def clip(text: str, limit: int = _MAX_MESSAGE_CHARS) -> str:
    """`text` on one line, cut to `limit` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def post_json(
    client: httpx.AsyncClient,
    url: str,
    *,
    provider_id: str,
    headers: Mapping[str, str],
    body: object,
    deadline: float,
    timeout_seconds: float,
) -> httpx.Response:
    """POST `body` as JSON; return the response, or raise a `ProviderError`."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise ProviderTimeout(f"Provider {provider_id!r} was not called: the deadline had passed.")
    budget = min(remaining, timeout_seconds)
    try:
        async with asyncio.timeout(budget):
            response = await client.post(url, headers=dict(headers), json=body, timeout=budget)
        metrics.provider_request(provider_id, response.status_code)
        return response
    except (TimeoutError, httpx.TimeoutException):
        metrics.provider_request(provider_id, "timeout")
        if remaining <= timeout_seconds:
            raise ProviderTimeout(
                f"Provider {provider_id!r} did not answer before the deadline."
            ) from None
        raise ProviderError(
            f"Provider {provider_id!r} did not answer within its timeout of "
            f"{timeout_seconds:g} seconds.",
            retryable=True,
            error_class="timeout",
        ) from None
    except httpx.TransportError as e:
        metrics.provider_request(provider_id, "error")
        detail = clip(str(e)) or type(e).__name__
        raise ProviderError(
            f"Provider {provider_id!r} could not be reached ({type(e).__name__}: {detail}).",
            retryable=True,
            error_class="connection",
        ) from None


def json_object(response: httpx.Response) -> dict[str, object] | None:
    """The response body as a JSON object, or None when it is not one."""
    try:
        data = response.json()
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def http_error(
    provider_id: str,
    response: httpx.Response,
    *,
    api_message: str | None,
    api_type: str | None,
    retryable: bool,
    secrets: Iterable[str | None],
    error_class: str | None = None,
) -> ProviderError:
    """The error for a non-2xx answer, quoting the API's own message (redacted, clipped)."""
    status = response.status_code
    if api_message:
        detail = clip(redact(api_message, secrets))
    else:
        detail = clip(redact(response.text, secrets), 200) or response.reason_phrase or "no body"
    kind = f" {api_type}" if api_type else ""
    return ProviderError(
        f"Provider {provider_id!r} answered HTTP {status}{kind}: {detail}",
        status=status,
        retryable=retryable,
        retry_after=parse_retry_after(response.headers) if retryable else None,
        error_class=error_class or status_class(status),
    )


def malformed(provider_id: str, what: str, error_class: str = "malformed") -> ProviderError:
    """The error for a 2xx answer that does not have the protocol's shape."""
    return ProviderError(
        f"Provider {provider_id!r} sent a malformed answer: {what}.",
        status=None,
        error_class=error_class,
    )


_STATUS_CLASSES = {
    400: "bad_request",
    401: "auth",
    403: "forbidden",
    404: "not_found",
    408: "timeout",
    413: "too_large",
    422: "bad_request",
    429: "rate_limited",
    503: "overloaded",
    529: "overloaded",
}


def status_class(status: int) -> str:
    """The error class of an HTTP status, where the API's own error type says no more."""
    if status in _STATUS_CLASSES:
        return _STATUS_CLASSES[status]
    return "server_error" if status >= 500 else "other"


def retryable_status(status: int) -> bool:
    """Statuses worth another try: timeouts, conflicts, rate limits, server errors."""
    return status in (408, 409, 429) or status >= 500

"""The one error shape for everything Litestar serves: `{"ok": false, "error", "code"}`.

The hook endpoint writes its errors itself (server.asgi); these handlers cover the admin API, the
health check and any path Litestar routes, so no response is ever text/plain or a stack trace.
"""

from __future__ import annotations

import logging
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from ..engine.errors import Refusal, RequestError
from .console.headers import HEADERS as CONSOLE_HEADERS
from .ingress.refusals import as_error
from .store.base import StoreUnavailable
from .store.bounded import retry_after_store, store_unavailable

log = logging.getLogger("hookwise.http")
CONSOLE_PATH = "/ui"

CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    429: "too_many_requests",
}
MESSAGES = {404: "no such endpoint", 405: "method not allowed"}


def _response(
    status: int, code: str, message: str, field: str | None = None, headers=None
) -> Response:
    body: dict[str, object] = {"ok": False, "error": message, "code": code}
    if field:
        body["field"] = field
    return Response(body, status_code=status, headers=headers, media_type="application/json")


def request_error(_: Request, exc: RequestError) -> Response:
    return Response(exc.to_body(), status_code=exc.status, media_type="application/json")


def refusal(request: Request, exc: Refusal) -> Response:
    """An engine refusal that reached a route (not through the hook path): answered with the
    status the ingress chooses for its code."""
    return request_error(request, as_error(exc))


def http_error(_: Request, exc: HTTPException) -> Response:
    status = exc.status_code
    if isinstance(exc, ValidationException):
        extra = exc.extra if isinstance(exc.extra, list) else []
        detail = extra[0] if extra and isinstance(extra[0], dict) else {}
        field = detail.get("key")
        body = detail.get("source") == "body"
        if body and field == "data":  # the body as a whole
            field = None
        what = field or ("the body" if body else "a parameter")
        reason = str(detail.get("message") or "")[:200]  # msgspec's: what was expected
        message = f"invalid value for {what}" + (f": {reason}" if reason else "")
        return _response(400, "invalid_body" if body else "invalid_query", message, field)
    message = MESSAGES.get(status) or (
        exc.detail if isinstance(exc.detail, str) else "request refused"
    )
    return _response(status, CODES.get(status, "http_error"), message, headers=exc.headers)


def unexpected_error(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    return _response(
        HTTP_500_INTERNAL_SERVER_ERROR, "internal_error", "the gateway failed to handle the request"
    )


def store_error(_: Request, exc: StoreUnavailable) -> Response:
    log.warning("503 store_unavailable: %s", exc)
    error = store_unavailable(exc)
    headers = {k.decode(): v.decode() for k, v in retry_after_store()}
    return Response(
        error.to_body(), status_code=503, headers=headers, media_type="application/json"
    )


def _console_aware(handler: Any) -> Any:
    """`handler`, with the console's security headers on answers under `/ui` (a 404 or 405
    there is answered here, outside the console's router and its `after_request`)."""

    def handle(request: Request, exc: Any) -> Response:
        response = handler(request, exc)
        path = request.scope.get("path", "")
        if path == CONSOLE_PATH or path.startswith(CONSOLE_PATH + "/"):
            for name, value in CONSOLE_HEADERS.items():
                response.headers.setdefault(name, value)
        return response

    return handle


EXCEPTION_HANDLERS = {
    RequestError: _console_aware(request_error),
    Refusal: _console_aware(refusal),
    StoreUnavailable: _console_aware(store_error),
    HTTPException: _console_aware(http_error),
    Exception: _console_aware(unexpected_error),
}

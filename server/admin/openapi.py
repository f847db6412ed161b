"""The OpenAPI document of hookwise's HTTP API, served without auth (it holds no data):
`/schema/openapi.json`, and a browsable page at `/schema` (Swagger UI, whose scripts and styles
come from the installed `swagger-ui-py` package under `/schema/assets/`: nothing loads from a CDN).
Every `/schema` response carries the console's security headers (`console.headers`: a CSP with
no inline script or style, no framing, `nosniff`); the page holds no inline script (it starts
Swagger UI with `/schema/swagger-init.js`), so the CSP holds for it too.

Litestar describes the admin routes from their handlers and models; `finish` makes the document
true where the framework cannot know: every error is the one shape `{ok: false, error, code,
field?}` with the statuses each route really answers (400 only where there is a query, a header
or a body to refuse, 404 where the path names an item, the 409 and 422 of the recovery routes),
the admin routes' 401 and 403, `/readyz`'s 503, `/metrics` as Prometheus text behind the gateway
token (unless `gateway.metrics.public`), and the hook endpoints (`{hook path}/wake`, `/agent`,
`/{name}`), which bypass Litestar's routing and so are not seen by it. The finished document is
made once per application, on the first request for it.
"""

from __future__ import annotations

import copy
import importlib.metadata
import json
from pathlib import Path
from typing import Any

from litestar import Request, Response, Router, get
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin, SwaggerRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme
from litestar.static_files import create_static_files_router

from ..console.headers import secure_headers
from ..lifecycle.gateway import Gateway

ASSETS = "/schema/assets"
_PAYLOAD_SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "Error",
    "description": "Every error hookwise answers: a sentence for people, a stable code for code.",
    "required": ["ok", "error", "code"],
    "properties": {
        "ok": {"const": False},
        "error": {"type": "string", "description": "what went wrong, for a person"},
        "code": {"type": "string", "description": "stable, for programs (`run_not_found`, ...)"},
        "field": {"type": "string", "description": "the parameter or body field at fault"},
        "rule": {"type": "string", "description": "the rule at fault (hook endpoints)"},
    },
}
_ERROR_REF = {"$ref": "#/components/schemas/Error"}

ERRORS = {
    400: "The query, a header or the body is not valid (`invalid_query`, `invalid_body`, ...; "
    "`field` names it).",
    401: "No or a wrong token (`unauthorized`).",
    403: "The admin API is disabled: no `gateway.auth.token` is configured (`admin_disabled`).",
    404: "Nothing has this id (`run_not_found`, `delivery_not_found`, `request_not_found`, "
    "`session_not_found`, `payload_not_found`, `alert_not_found`; a pause's `mapping_not_found`, `path_not_found`, "
    "`agent_not_found`).",
    408: "The body did not arrive in time (`body_timeout`); the connection is closed.",
    409: "The item is not in a state that allows this (`run_not_retryable`, "
    "`delivery_not_retryable`, `hooks_disabled`, `alert_resolved`; resuming what is not paused: `not_paused`).",
    413: "The body is larger than `hooks.maxBodyBytes` (`payload_too_large`).",
    422: "The request cannot be processed as it stands: an `Idempotency-Key` used for another "
    "request (`idempotency_key_reused`), a replay today's rules refuse (`replay_refused`).",
    429: "Too many failed authentications from this address (`locked_out`); see `Retry-After`.",
    503: "Not ready: the store does not answer or a loop of this process is not running.",
}

# statuses beyond the ones every route of its kind answers: (method, path) -> statuses
_EXTRA: dict[tuple[str, str], set[int]] = {
    ("post", "/api/runs/{run_id}/retry"): {409},
    ("post", "/api/deliveries/{delivery_id}/retry"): {409},
    ("post", "/api/requests/{request_id}/replay"): {409, 422},
    ("post", "/api/pause"): {404},
    ("post", "/api/resume"): {404, 409},
    ("post", "/api/alerts/{alert_id}/ack"): {409},
}


def _version() -> str:
    try:
        return importlib.metadata.version("hookwise")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - run from a checkout
        return "0"


def _error(status: int, description: str | None = None) -> dict[str, Any]:
    return {
        "description": description or ERRORS[status],
        "content": {"application/json": {"schema": _ERROR_REF}},
    }


def _admin_statuses(method: str, path: str, operation: dict[str, Any]) -> set[int]:
    params = operation.get("parameters", [])
    statuses = {401, 403}
    if operation.get("requestBody") or any(p.get("in") != "path" for p in params):
        statuses.add(400)
    if any(p.get("in") == "path" for p in params):
        statuses.add(404)
    return statuses | _EXTRA.get((method, path), set())


def _payload_schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((_PAYLOAD_SCHEMAS / f"{name}.schema.json").read_text())
    for key in ("$schema", "$id"):
        schema.pop(key, None)
    return schema


def _accepted(description: str) -> dict[str, Any]:
    body = {"type": "object", "required": ["ok"], "properties": {"ok": {"const": True}}}
    return {"description": description, "content": {"application/json": {"schema": body}}}


def _hook_operation(summary: str, description: str, body: dict[str, Any]) -> dict[str, Any]:
    responses = {str(status): _error(status) for status in (400, 408, 413, 422, 429)}
    responses["401"] = _error(
        401, "No or a wrong token or signature (`unauthorized`, `invalid_signature`)."
    )
    return {
        "tags": ["hooks"],
        "summary": summary,
        "description": description,
        "security": [{"hookBearer": []}, {"hookHeader": []}, {"hookQuery": []}],
        "parameters": [
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": False,
                "description": "a repeat within `hooks.idempotencyWindow` answers the first "
                "response with `Idempotent-Replayed: true` and creates nothing",
                "schema": {"type": "string", "maxLength": 256},
            }
        ],
        "requestBody": {"required": True, "content": {"application/json": {"schema": body}}},
        "responses": responses,
    }


def _hook_paths(hook_path: str) -> dict[str, Any]:
    wake = _hook_operation(
        "Wake the main session",
        "A system event for the agent's main session (`mode: now` also runs a heartbeat).",
        _payload_schema("wake"),
    )
    wake["responses"]["200"] = _accepted("The event is stored (`eventId`).")
    agent = _hook_operation(
        "Start an agent run",
        "An isolated agent turn in its own session; its reply can go to a channel.",
        _payload_schema("agent"),
    )
    agent["responses"]["202"] = _accepted(
        "The run is queued (`runId`, `sessionKey`); after a `wait` that ended first, `Location`"
        " names the run's status URL."
    )
    agent["responses"]["200"] = _outcome("The run ended within the `wait` asked for.")
    agent["parameters"].append(_WAIT_PARAMETER)
    mapped = _hook_operation(
        "A mapped hook",
        "The payload goes through the rules whose `match.path` is `{name}` (a JSON object or a "
        "form); a rule's `respond` sets the answer. A path guarded by `auth: signature` takes "
        "the provider's signature instead of the hook token.",
        {"type": "object"},
    )
    mapped["parameters"].insert(
        0, {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
    )
    mapped["responses"]["404"] = _error(404, "No rule's `match.path` is `{name}` (`not_found`).")
    for status, what in (("200", "A wake (or a rule's answer)"), ("202", "An agent run")):
        mapped["responses"][status] = {
            "description": what,
            "content": {"application/json": {"schema": {}}},
        }
    mapped["responses"]["204"] = {"description": "Accepted; the rule answers with no body."}
    mapped["parameters"].append(_WAIT_PARAMETER)
    base = hook_path.rstrip("/")
    return {
        f"{base}/wake": {"post": wake},
        f"{base}/agent": {"post": agent},
        base + "/{name}": {"post": mapped},
        base + "/runs/{runId}": {"get": _status_operation()},
    }


_WAIT_PARAMETER = {
    "name": "wait",
    "in": "query",
    "required": False,
    "description": "hold the request until its run ends, at most this long (seconds or a "
    "duration such as 30s; empty: `hooks.maxWait`)",
    "schema": {"type": "string", "pattern": r"^(\s*\d+(\.\d+)?\s*(ms|s|m|h|d)?\s*)?$"},
}

_USAGE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "inputTokens": {"type": ["integer", "null"]},
        "outputTokens": {"type": ["integer", "null"]},
    },
}

_OUTCOME = {
    "type": "object",
    "required": ["ok", "runId", "state"],
    "properties": {
        "ok": {"const": True},
        "runId": {"type": "string"},
        "state": {"type": "string"},
        "reply": {"type": ["string", "null"]},
        "model": {"type": ["string", "null"]},
        "error": {"type": "string"},
        "usage": _USAGE,
    },
}


def _outcome(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _OUTCOME}}}


_SIGNED_HEADERS = [
    {"name": name, "in": "header", "required": True, "schema": {"type": "string"}, "description": d}
    for name, d in (
        ("webhook-id", "the delivery's id, the same on every attempt"),
        ("webhook-timestamp", "Unix seconds of this attempt"),
        ("webhook-signature", "v1,<base64 HMAC-SHA256 of id.timestamp.body>"),
    )
]


def _lifecycle_webhooks() -> dict[str, Any]:
    """What hookwise POSTs, signed as Standard Webhooks: lifecycle events to
    `events.subscribers`, a run's outcome to its mapping's `callback` (same payload)."""
    out: dict[str, Any] = {}
    for kind, what in (
        ("run.finished", "A run ended, whatever its state (and a callback's `run.<state>`)."),
        ("run.succeeded", "A run succeeded."),
        ("run.failed", "A run failed."),
        ("run.timed_out", "A run took longer than its timeout."),
    ):
        body = {
            "type": "object",
            "required": ["type", "timestamp", "data"],
            "properties": {
                "type": {"const": kind},
                "timestamp": {"type": "string", "format": "date-time"},
                "data": _RUN_EVENT_DATA,
            },
        }
        out[kind] = _signed_post(what, body)
    failed = {
        "type": "object",
        "required": ["type", "timestamp", "data"],
        "properties": {
            "type": {"const": "delivery.failed"},
            "timestamp": {"type": "string", "format": "date-time"},
            "data": _DELIVERY_EVENT_DATA,
        },
    }
    out["delivery.failed"] = _signed_post(
        "A delivery (a reply, a notification, a callback) failed for good: no attempt or "
        "fallback left. Never sent about a lifecycle event's own delivery.",
        failed,
    )
    return out


def _signed_post(what: str, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "post": {
            "summary": what,
            "parameters": _SIGNED_HEADERS,
            "requestBody": {"content": {"application/json": {"schema": body}}},
            "responses": {"2XX": {"description": "Received; any other answer is retried."}},
        }
    }


_DELIVERY_EVENT_DATA = {
    "type": "object",
    "required": ["deliveryId", "channel", "error"],
    "properties": {
        "deliveryId": {"type": "string"},
        "runId": {"type": ["string", "null"]},
        "heartbeatId": {"type": ["string", "null"]},
        "channel": {"type": ["string", "null"]},
        "attempts": {"type": "integer"},
        "error": {"type": "string"},
    },
}


_RUN_EVENT_DATA = {
    "type": "object",
    "required": ["runId", "state"],
    "properties": {
        "runId": {"type": "string"},
        "rule": {"type": ["string", "null"]},
        "agentId": {"type": "string"},
        "sessionKey": {"type": "string"},
        "state": {"enum": ["succeeded", "failed", "timed_out"]},
        "reply": {"type": ["string", "null"]},
        "error": {"type": ["string", "null"]},
        "model": {"type": ["string", "null"]},
        "usage": _USAGE,
    },
}


def _status_operation() -> dict[str, Any]:
    """`GET {hook path}/runs/{runId}?key=...`: the status URL a waited request was given."""
    return {
        "tags": ["hooks"],
        "summary": "A waited run's status",
        "description": "The URL in the `Location` of a waited request's answer; only that URL "
        "(its `key`) reads that run.",
        "security": [{"hookBearer": []}, {"hookHeader": []}, {"hookQuery": []}],
        "parameters": [
            {"name": "runId", "in": "path", "required": True, "schema": {"type": "string"}},
            {"name": "key", "in": "query", "required": False, "schema": {"type": "string"}},
        ],
        "responses": {
            "200": _outcome("The run has ended: its outcome."),
            "202": _outcome("The run has not ended yet (`state`); ask again."),
            "401": _error(401),
            "404": _error(404, "No such run, or the key is not this run's (`run_not_found`)."),
            "429": _error(429),
        },
    }


def finish(document: dict[str, Any], gateway: Gateway) -> dict[str, Any]:
    """Litestar's `document` made true for this `gateway` (see the module's docstring)."""
    doc = copy.deepcopy(document)
    components = doc.setdefault("components", {})
    components.setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    schemes = components.setdefault("securitySchemes", {})
    schemes["bearer"] = {"type": "http", "scheme": "bearer", "description": "gateway.auth.token"}
    for path, item in doc.get("paths", {}).items():
        for method, operation in item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = {k: v for k, v in operation["responses"].items() if k.startswith("2")}
            if path.startswith("/api/"):
                for status in sorted(_admin_statuses(method, path, operation)):
                    responses[str(status)] = _error(status)
            operation["responses"] = responses
    readyz = doc["paths"].get("/readyz", {}).get("get")
    if readyz is not None:
        readyz["summary"] = "Readiness: the store answers and this process's loops run"
        readyz["responses"]["503"] = _error(503)
        readyz["responses"]["503"]["content"]["application/json"]["schema"] = {
            "allOf": [
                _ERROR_REF,
                {
                    "type": "object",
                    "required": ["reasons"],
                    "properties": {"reasons": {"type": "array", "items": {"type": "string"}}},
                },
            ]
        }
    scrape = doc["paths"].get("/metrics", {}).get("get")
    if scrape is not None:
        scrape["summary"] = "Prometheus metrics (text exposition format 0.0.4)"
        scrape["responses"] = {
            "200": {
                "description": "The scrape.",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            }
        }
        if not gateway.config.gateway.metrics.public:
            scrape["security"] = [{"bearer": []}]
            scrape["responses"].update({"401": _error(401), "403": _error(403)})
    doc["webhooks"] = _lifecycle_webhooks()
    if gateway.hooks is not None:
        schemes["hookBearer"] = {
            "type": "http",
            "scheme": "bearer",
            "description": "hooks.token",
        }
        schemes["hookHeader"] = {"type": "apiKey", "in": "header", "name": "x-service-token"}
        schemes["hookQuery"] = {
            "type": "apiKey",
            "in": "query",
            "name": "token",
            "description": "for senders that cannot add a header; redacted from every log",
        }
        doc["paths"].update(_hook_paths(gateway.config.hooks.path))
        doc.setdefault("tags", []).append(
            {"name": "hooks", "description": "Give the hook token in exactly one of three ways."}
        )
    return doc


class _Finished:
    """The finished document of one application, made on first use."""

    def __init__(self) -> None:
        self._done: tuple[int, dict[str, Any]] | None = None

    def of(self, request: Request, document: dict[str, Any]) -> dict[str, Any]:
        if self._done is None or self._done[0] != id(document):
            self._done = (id(document), finish(document, request.app.state.gateway))
        return self._done[1]


_FINISHED = _Finished()


class _Json(JsonRenderPlugin):
    def render(self, request: Request, openapi_schema: dict[str, Any]) -> bytes:
        return super().render(request, _FINISHED.of(request, openapi_schema))


class _SwaggerUI(SwaggerRenderPlugin):
    """Swagger UI without inline script or style: it loads the document from `openapi.json`."""

    def render(self, request: Request, openapi_schema: dict[str, Any]) -> bytes:
        title = openapi_schema["info"]["title"]
        return (
            "<!DOCTYPE html><html><head>"
            f"<title>{title}</title>{self.favicon}"
            '<meta charset="utf-8"/>'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<link href="{self.css_url}" rel="stylesheet">'
            f'<script src="{self.js_url}"></script>'
            f'<script src="{self.standalone_preset_js_url}"></script>'
            "</head><body><div id='swagger-container'></div>"
            f'<script src="{INIT_JS}"></script>'
            "</body></html>"
        ).encode()


INIT_JS = "/schema/swagger-init.js"
_INIT = """window.ui = SwaggerUIBundle({
  url: "/schema/openapi.json",
  dom_id: "#swagger-container",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
});
"""


@get("/swagger-init.js", include_in_schema=False, sync_to_thread=False)
def _swagger_init() -> Response[str]:
    return Response(_INIT, media_type="text/javascript; charset=utf-8")


def _assets_dir() -> Path:
    import swagger_ui

    return Path(swagger_ui.__file__).parent / "static"


def assets_router() -> Router:
    """Swagger UI's scripts, styles and icons, from the installed package."""
    return create_static_files_router(
        path=ASSETS,
        directories=[_assets_dir()],
        include_in_schema=False,
        name="schema-assets",
        after_request=secure_headers,
    )


def openapi_config() -> OpenAPIConfig:
    return OpenAPIConfig(
        title="hookwise HTTP API",
        version=_version(),
        description=(
            "The admin API (what the gateway received, queued, ran and delivered, and sending "
            "failed work back to the queue), the operating endpoints and the hook endpoints. "
            "Every route under /api needs `Authorization: Bearer <gateway.auth.token>`; the hook "
            "endpoints take the hook token. Times are ISO-8601 UTC strings; listings are newest "
            "first with a cursor. Every error is `{ok: false, error, code, field?}`."
        ),
        path="/schema",
        openapi_router=Router(
            "/schema",
            route_handlers=[_swagger_init],
            after_request=secure_headers,
            include_in_schema=False,
        ),
        render_plugins=[
            _SwaggerUI(
                path="/",
                js_url=f"{ASSETS}/swagger-ui-bundle.js",
                css_url=f"{ASSETS}/swagger-ui.css",
                standalone_preset_js_url=f"{ASSETS}/swagger-ui-standalone-preset.js",
                favicon=f"<link rel='icon' type='image/png' href='{ASSETS}/favicon-32x32.png'>",
            ),
            _Json(path="/openapi.json"),
        ],
        components=Components(
            security_schemes={"bearer": SecurityScheme(type="http", scheme="bearer")}
        ),
        use_handler_docstrings=True,
    )

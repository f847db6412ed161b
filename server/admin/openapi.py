"""The OpenAPI description of the admin API, served without auth (it holds no data):
`/schema/openapi.json` and a browsable page at `/schema` (Swagger UI)."""

from __future__ import annotations

import importlib.metadata

from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin, SwaggerRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme


def _version() -> str:
    try:
        return importlib.metadata.version("hookwise")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - run from a checkout
        return "0"


def openapi_config() -> OpenAPIConfig:
    return OpenAPIConfig(
        title="hookwise admin API",
        version=_version(),
        description=(
            "What the gateway received, queued, ran and delivered, and sending failed work back"
            " to the queue. Every route under /api needs `Authorization: Bearer <gateway.auth."
            "token>`. Times are ISO-8601 UTC strings; listings are newest first with a cursor."
            " Errors are `{ok: false, error, code, field?}`."
        ),
        path="/schema",
        render_plugins=[SwaggerRenderPlugin(path="/"), JsonRenderPlugin(path="/openapi.json")],
        components=Components(
            security_schemes={"bearer": SecurityScheme(type="http", scheme="bearer")}
        ),
        use_handler_docstrings=True,
    )

"""The OpenAPI document is true: Schemathesis reads it from the running server, generates
requests for every operation it describes (the admin API, the operating endpoints, the hook
endpoints), both valid and invalid ones, and finds no answer that contradicts it: no status,
media type or body it does not describe, and no server error. Bounded: a fixed seed and a few
dozen examples per operation.

And the document's page works offline: the Swagger UI page loads its scripts and styles from
the gateway itself.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess, base_config

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
EXAMPLES = 30


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    config = base_config(
        mappings=[
            {
                "id": "demo",
                "match": {"path": "demo"},
                "action": "wake",
                "textTemplate": "demo {{ title | default('') }}",
            }
        ]
    )
    config["agents"] = {"defaults": {"model": "echo/echo"}}
    return start_module_gateway(config, name="openapi")


def _operations(gw: GatewayProcess) -> list[Any]:
    schema = schemathesis.openapi.from_url(f"{gw.url}/schema/openapi.json")
    return [result.ok() for result in schema.get_all_operations()]


def _auth(path: str) -> dict[str, str]:
    token = ADMIN_TOKEN if path.startswith(("/api/", "/metrics")) else HOOK_TOKEN
    return {"Authorization": f"Bearer {token}"}


def test_the_document_describes_every_kind_of_endpoint(gw: GatewayProcess) -> None:
    assert gw.client is not None
    doc = gw.client.get("/schema/openapi.json").json()
    for path in ("/hooks/wake", "/hooks/agent", "/hooks/{name}", "/metrics", "/api/runs"):
        assert path in doc["paths"], path
    error = {"$ref": "#/components/schemas/Error"}
    runs = doc["paths"]["/api/runs/{run_id}/retry"]["post"]["responses"]
    assert set(runs) == {"202", "400", "401", "403", "404", "409"}
    assert all(
        runs[s]["content"]["application/json"]["schema"] == error for s in runs if s != "202"
    )
    assert doc["components"]["schemas"]["Error"]["required"] == ["ok", "error", "code"]
    metrics = doc["paths"]["/metrics"]["get"]
    assert list(metrics["responses"]["200"]["content"]) == ["text/plain"]
    assert metrics["security"] == [{"bearer": []}]


def test_the_docs_page_loads_nothing_from_elsewhere(gw: GatewayProcess) -> None:
    assert gw.client is not None
    page = gw.client.get("/schema")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
    assert urls and all(u.startswith("/schema/") for u in urls), urls
    for url in urls:
        asset = gw.client.get(url)
        assert asset.status_code == 200, url
        # Swagger UI's own files, and the few lines that start it (no inline script: CSP)
        assert len(asset.content) > (1000 if url.startswith("/schema/assets/") else 100), url


def _drive(
    gw: GatewayProcess, operation: Any, mode: schemathesis.GenerationMode, seen: Counter[str]
) -> None:
    """Examples of one operation sent to the server; raises at the first contradiction. `seen`
    counts the answers by operation and status."""
    headers = _auth(operation.path)

    @seed(29)
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def call(case: Any) -> None:
        # the token goes in one way, the Authorization header (the other two ways of the hook
        # token are documented too, and a request that uses two is refused)
        if isinstance(case.query, dict):
            case.query.pop("token", None)
        if isinstance(case.headers, dict):
            case.headers.pop("x-service-token", None)
        response = case.call_and_validate(
            base_url=gw.url, headers=headers, checks=CHECKS, timeout=10
        )
        seen[f"{operation.method.upper()} {operation.path} {response.status_code}"] += 1

    call()


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_no_answer_contradicts_the_document(gw: GatewayProcess, mode: str) -> None:
    problems: list[str] = []
    seen: Counter[str] = Counter()
    for operation in _operations(gw):
        try:
            _drive(gw, operation, schemathesis.GenerationMode(mode), seen)
        except Unsatisfiable:  # nothing of the operation's to make invalid (GET /healthz)
            assert mode == "negative" and not operation.query.items and not operation.body.items
        except Exception as e:
            problems.append(f"{operation.method.upper()} {operation.path}: {e}")
    assert not problems, "\n\n".join(problems)
    if mode == "positive":  # the examples got past the door, not only refused at it
        for answered in ("POST /hooks/wake 200", "POST /hooks/agent 202", "GET /api/runs 200"):
            assert seen[answered] > 0, sorted(seen.items())


def test_the_document_describes_the_signed_webhooks_hookwise_sends(gw: GatewayProcess) -> None:
    assert gw.client is not None
    doc = gw.client.get("/schema/openapi.json").json()
    assert set(doc["webhooks"]) == {
        "run.finished",
        "run.succeeded",
        "run.failed",
        "run.timed_out",
        "delivery.failed",
    }
    failed = doc["webhooks"]["delivery.failed"]["post"]["requestBody"]["content"]
    assert failed["application/json"]["schema"]["properties"]["type"] == {
        "const": "delivery.failed"
    }
    post = doc["webhooks"]["run.failed"]["post"]
    assert [p["name"] for p in post["parameters"]] == [
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
    ]
    body = post["requestBody"]["content"]["application/json"]["schema"]
    assert body["properties"]["type"] == {"const": "run.failed"}
    status = doc["paths"]["/hooks/runs/{runId}"]["get"]["responses"]
    assert set(status) == {"200", "202", "401", "404", "429"}

"""Whether tracing is on, and where it exports: the `telemetry.traces` keys over the standard
`OTEL_*` variables (server/telemetry/setup.py). Off unless asked; `OTEL_SDK_DISABLED` wins."""

from __future__ import annotations

import pytest

from hookwise.engine.config.models import TracesConfig
from hookwise.server.telemetry.setup import traces_endpoint, wanted


@pytest.mark.parametrize(
    ("enabled", "env", "on"),
    [
        (None, {}, False),  # off by default
        (None, {"OTEL_TRACES_EXPORTER": "otlp"}, True),
        (None, {"OTEL_TRACES_EXPORTER": "console"}, False),  # only OTLP is exported
        (None, {"OTEL_TRACES_EXPORTER": "none"}, False),
        (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, False),  # an endpoint alone
        (True, {}, True),
        (False, {"OTEL_TRACES_EXPORTER": "otlp"}, False),  # the file's key wins
        (True, {"OTEL_SDK_DISABLED": "true"}, False),  # the kill switch wins over all
        (None, {"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"}, False),
    ],
)
def test_tracing_is_on_only_when_asked(enabled: bool | None, env: dict[str, str], on: bool) -> None:
    assert wanted(TracesConfig(enabled=enabled), env) is on


def test_the_configured_endpoint_is_a_base_url_like_the_standard_variable() -> None:
    assert traces_endpoint(TracesConfig(endpoint="http://c:4318/")) == "http://c:4318/v1/traces"
    assert traces_endpoint(TracesConfig()) is None  # the exporter reads OTEL_* itself


def test_a_sample_ratio_outside_0_to_1_is_refused() -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        TracesConfig(sample_ratio=1.5)

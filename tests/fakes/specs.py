"""The services' own API descriptions, as JSON Schema validators for requests and answers.

`tests/fakes/api_specs/` holds extracts of each service's published description (sources and
commits in its README). `validator("discord", "#/components/schemas/MessageResponse")` checks a
value against one schema of one file, resolving `$ref`s inside that file; the draft follows the
file's format (Swagger 2.0 is JSON Schema draft 4, OpenAPI 3.1 is 2020-12). The fakes use it to
refuse requests the real service would refuse, and the tests to check the fakes' answers.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import jsonschema

SPEC_DIR = Path(__file__).parent / "api_specs"


@functools.cache
def spec(name: str) -> dict[str, Any]:
    """One description file, parsed (Telegram's `#/types/X` refs pointed at their schemas)."""
    text = (SPEC_DIR / f"{name}.json").read_text(encoding="utf-8")
    if name == "telegram":
        text = re.sub(r'"#/types/(\w+)"', r'"#/types/\1/json_schema"', text)
    return json.loads(text)


@functools.cache
def validator(name: str, pointer: str) -> jsonschema.protocols.Validator:
    """A validator for the schema at `pointer` (`#/...`) of description `name`."""
    document = spec(name)
    root = {k: v for k, v in document.items() if k not in ("$schema", "$id")}
    root["$ref"] = pointer
    fmt = str(document.get("format", ""))
    cls = (
        jsonschema.Draft4Validator
        if fmt.startswith(("swagger", "openapi-3.0"))
        else (jsonschema.Draft202012Validator)
    )
    return cls(root)


def problems(name: str, pointer: str, value: Any) -> list[str]:
    """What is wrong with `value` under the schema, one line per error ([] when it is valid)."""
    errors = sorted(validator(name, pointer).iter_errors(value), key=lambda e: list(e.path))
    return [f"{'/'.join(map(str, e.path)) or '(root)'}: {e.message[:200]}" for e in errors]


def check(name: str, pointer: str, value: Any) -> None:
    """Raise AssertionError listing the problems of `value` under the schema."""
    found = problems(name, pointer, value)
    assert not found, f"{name} {pointer}: " + "; ".join(found[:5])

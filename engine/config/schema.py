"""JSON Schema from the config models, so the schema editors use can never drift from the code.

`python -m hookwise.engine.config.schema > schemas/config.schema.json` writes the config file's schema; a test
regenerates it and compares. Descriptions come from the models' docstrings.
"""

from __future__ import annotations

import inspect
import json
import sys
import types
import typing
from typing import Any, Literal, get_args, get_origin

import attrs

from .convert import data_key
from .durations import Duration
from .prices import PerTokens

DURATION = {
    "oneOf": [
        {"type": "number", "minimum": 0},
        {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*(ms|s|m|h|d)?\s*$"},
    ],
    "description": "seconds, or a string such as 250ms, 30s, 5m, 24h",
}


PER_TOKENS = {
    "oneOf": [
        {"type": "integer", "minimum": 1},
        {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*[kKmM]?\s*$"},
    ],
    "description": "a number of tokens, or a string such as 1M or 1K",
}
#: a `model` given as a list is its chain (`hookwise.engine.config.load.model_lists`)
CHAIN = {"type": "array", "items": {"type": "string"}, "minItems": 1}


def _type_schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    if tp is Any or tp is object:
        return {}
    if tp is Duration:
        return dict(DURATION)
    if tp is PerTokens:
        return dict(PER_TOKENS)
    if tp is str:
        return {"type": "string"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    origin = get_origin(tp)
    if origin is Literal:
        return {"enum": list(get_args(tp))}
    if origin in (typing.Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        options = [_type_schema(a, defs) for a in args]
        if type(None) in get_args(tp):
            options.append({"type": "null"})
        return options[0] if len(options) == 1 else {"anyOf": options}
    if origin in (tuple, list):
        items = get_args(tp)
        return {"type": "array", "items": _type_schema(items[0] if items else Any, defs)}
    if origin is dict or tp is dict:
        kv = get_args(tp)
        return {
            "type": "object",
            "additionalProperties": _type_schema(kv[1] if kv else Any, defs),
        }
    if attrs.has(tp):
        name = tp.__name__
        if name not in defs:
            defs[name] = {}  # reserve: recursion
            defs[name] = _class_schema(tp, defs)
        return {"$ref": f"#/$defs/{name}"}
    raise TypeError(f"no schema for {tp!r}")


def _class_schema(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    props: dict[str, Any] = {}
    required: list[str] = []
    for field in attrs.fields(cls):
        schema = _type_schema(hints[field.name], defs)
        if field.name == "model" and "fallbacks" in attrs.fields_dict(cls):
            schema = {"anyOf": [schema, CHAIN]}
        if field.default is attrs.NOTHING:
            required.append(data_key(field))
        elif not isinstance(field.default, attrs.Factory) and field.default is not None:  # type: ignore[arg-type]
            default: Any = field.default
            if isinstance(default, tuple):
                default = list(default)
            schema = {**schema, "default": default}
        props[data_key(field)] = schema
    out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    doc = inspect.getdoc(cls)
    if doc:
        out["description"] = doc.split("\n\n")[0].replace("\n", " ")
    if required:
        out["required"] = required
    return out


def config_schema() -> dict[str, Any]:
    from .models import Config

    defs: dict[str, Any] = {}
    root = _class_schema(Config, defs)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://hookwise.dev/schemas/config.schema.json",
        "title": "hookwise configuration",
        **root,
        "$defs": dict(sorted(defs.items())),
    }


def main() -> None:
    json.dump(config_schema(), sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

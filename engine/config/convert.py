"""Structuring of configuration data into frozen attrs models, with a key path in every error.

Conventions every config model follows:
- attrs field names are snake_case; the data's keys are the camelCase form (`max_body_bytes` <->
  `maxBodyBytes`). A field may override its key with `metadata={"key": "..."}`.
- Primitive types are strict: a string is not silently made an int, nor a number a string.
- Unknown keys are errors, with a "did you mean" suggestion when one is close.

`structure(data, cls, path)` returns the model or raises `ConfigError` listing every problem with
its key path, e.g. `hooks.mappings[1].action: must be one of wake, agent`.
"""

from __future__ import annotations

import difflib
import typing
from typing import Any, Literal, TypeVar, get_args, get_origin

import attrs
import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, override

from ..errors import ConfigError, ConfigIssue

T = TypeVar("T")

converter = cattrs.Converter(forbid_extra_keys=True)


def camel(name: str) -> str:
    """`max_body_bytes` -> `maxBodyBytes`."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def data_key(field: attrs.Attribute) -> str:
    """The key under which a field appears in configuration data."""
    return field.metadata.get("key") or camel(field.name)


class _TypeMismatch(TypeError):
    def __init__(self, expected: str, value: object) -> None:
        super().__init__(f"must be {expected}, got {kind_of(value)}")


def kind_of(value: object) -> str:
    """What a JSON value is, for messages that must not quote it: `a string`, `a list`, ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _strict_str(value: object, _: type) -> str:
    if not isinstance(value, str):
        raise _TypeMismatch("a string", value)
    return value


def _strict_bool(value: object, _: type) -> bool:
    if not isinstance(value, bool):
        raise _TypeMismatch("true or false", value)
    return value


def _strict_int(value: object, _: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise _TypeMismatch("a whole number", value)
    return value


def _strict_float(value: object, _: type) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _TypeMismatch("a number", value)
    return float(value)


converter.register_structure_hook(str, _strict_str)
converter.register_structure_hook(bool, _strict_bool)
converter.register_structure_hook(int, _strict_int)
converter.register_structure_hook(float, _strict_float)


def _is_literal(tp: Any) -> bool:
    return get_origin(tp) is Literal


def _structure_literal(value: object, tp: Any) -> object:
    allowed = get_args(tp)
    if value not in allowed or isinstance(value, bool) != any(isinstance(a, bool) for a in allowed):
        raise ValueError("must be one of " + ", ".join(str(a) for a in allowed))
    return value


converter.register_structure_hook_func(_is_literal, _structure_literal)


def _list_hook_factory(tp: Any) -> Any:
    args = get_args(tp)
    item = args[0] if args else Any
    inner = converter.get_structure_hook(item) if item is not Any else (lambda v, _: v)

    def structure_list(value: object, _: Any) -> tuple[Any, ...]:
        if not isinstance(value, (list, tuple)):
            raise _TypeMismatch("a list", value)
        out, errors = [], []
        for i, v in enumerate(value):
            try:
                out.append(inner(v, item))
            except Exception as e:  # gathered, re-raised with the index
                e.__notes__ = [*getattr(e, "__notes__", []), f"@index {i}"]
                errors.append(e)
        if errors:
            raise IterableValidationError("invalid items", errors, tp)
        return tuple(out)

    return structure_list


def _is_seq(tp: Any) -> bool:
    origin = get_origin(tp)
    return origin in (tuple, list) and (
        origin is list or (len(get_args(tp)) == 2 and get_args(tp)[1] is ...)
    )


converter.register_structure_hook_factory(_is_seq, _list_hook_factory)


def _is_dict(tp: Any) -> bool:
    return get_origin(tp) is dict or tp is dict


def _dict_hook_factory(tp: Any) -> Any:
    args = get_args(tp)
    vt = args[1] if len(args) == 2 else Any
    inner = converter.get_structure_hook(vt) if vt is not Any else None

    def structure_dict(value: object, _: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise _TypeMismatch("a mapping", value)
        if inner is None:
            return dict(value)
        out, errors = {}, []
        for k, v in value.items():
            try:
                out[str(k)] = inner(v, vt)
            except Exception as e:
                e.__notes__ = [*getattr(e, "__notes__", []), f"@key {k}"]
                errors.append(e)
        if errors:
            raise IterableValidationError("invalid values", errors, tp)
        return out

    return structure_dict


converter.register_structure_hook_factory(_is_dict, _dict_hook_factory)


def _attrs_hook_factory(cl: type) -> Any:
    overrides: dict[str, Any] = {a.name: override(rename=data_key(a)) for a in attrs.fields(cl)}
    inner: Any = make_dict_structure_fn(cl, converter, _cattrs_forbid_extra_keys=True, **overrides)

    def structure_attrs(value: object, tp: type) -> Any:
        if not isinstance(value, dict):
            raise _TypeMismatch("a mapping", value)
        return inner(value, tp)

    return structure_attrs


converter.register_structure_hook_factory(attrs.has, _attrs_hook_factory)


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _issues(exc: BaseException, path: str, cl: type | None = None) -> list[ConfigIssue]:
    if isinstance(exc, ForbiddenExtraKeysError):
        known = [data_key(a) for a in attrs.fields(exc.cl)] if attrs.has(exc.cl) else []
        out = []
        for key in sorted(exc.extra_fields):
            hint = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            msg = "unknown key" + (f"; did you mean {hint[0]!r}?" if hint else "")
            out.append(ConfigIssue(_join(path, key), msg))
        return out
    if isinstance(exc, (ClassValidationError, IterableValidationError)):
        out = []
        for sub in exc.exceptions:
            sub_path = path
            for note in getattr(sub, "__notes__", []):
                name = note.name if isinstance(note, AttributeValidationNote) else None
                index = note.index if isinstance(note, IterableValidationNote) else None
                text = str(note)
                if name is not None:
                    key = name
                    if isinstance(exc, ClassValidationError) and attrs.has(exc.cl):
                        fld = attrs.fields_dict(exc.cl).get(name)
                        key = data_key(fld) if fld is not None else name
                    sub_path = _join(path, key)
                elif index is not None:
                    sub_path = _join(path, index)
                elif text.startswith("@index "):
                    sub_path = _join(path, int(text[7:]))
                elif text.startswith("@key "):
                    sub_path = _join(path, text[5:])
            out.extend(_issues(sub, sub_path))
        return out
    if isinstance(exc, KeyError):
        return [ConfigIssue(path, "required key is missing")]
    if isinstance(exc, (TypeError, ValueError)):
        msg = str(exc)
        if isinstance(exc, TypeError) and not isinstance(exc, _TypeMismatch):
            msg = "has the wrong type"
        return [ConfigIssue(path, msg)]
    return [ConfigIssue(path, str(exc) or type(exc).__name__)]


def structure(data: object, cls: type[T], path: str = "") -> T:
    """Structure `data` into `cls`, raising `ConfigError` with every problem and its key path."""
    try:
        return converter.structure(data, cls)
    except ConfigError:
        raise
    except Exception as exc:
        issues = _issues(exc, path)
        raise ConfigError(issues or [ConfigIssue(path, str(exc))]) from None


__all__ = ["ConfigError", "ConfigIssue", "camel", "converter", "data_key", "structure", "typing"]

"""Template rendering for mapping rules: one Jinja2 immutable sandbox, templates compiled at load.

What a template sees (built by `template_variables`): the payload's top-level keys as bare names
(so OpenClaw's `{{messages[0].subject}}` works), then the extracted names, then the reserved
names `payload`, `headers` (lower-cased keys), `query`, `path`, `now` (ISO 8601 text) and, inside
a `forEach` fan-out, `item` and `index`. Reserved names win over extracted names, which win over
payload keys.

Rules this module enforces:
- Missing values render empty, at any depth (`{{a.b[3].c}}` on a payload without `a` is `""`).
- Dicts and lists render as compact JSON, booleans as `true`/`false`, null as empty.
- Data is data: on a mapping, `x.name` is the key `name` only (never a dict method such as
  `items`); dunder keys and `__proto__`/`constructor`/`prototype` never resolve; attributes exist
  only on strings (their safe methods: `upper`, `split`, ...), never on other objects, so
  `{{ ''.__class__.__mro__ }}` and friends render empty and cannot reach Python internals.
- Filters beyond Jinja's own (`default`, `truncate`, `items`, ...): `tojson` (plain JSON, no
  HTML escaping) and `required` (`{{ x | required }}` or `required("why")`), which fails the
  request with a 400 naming the rule.

Errors carry no payload data: only the template's field, the missing name, or an error class.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import attrs
import jinja2
from jinja2 import nodes
from jinja2.runtime import new_context
from jinja2.sandbox import ImmutableSandboxedEnvironment

BLOCKED_KEYS = frozenset({"__proto__", "constructor", "prototype"})
RESERVED_NAMES = frozenset({"payload", "headers", "query", "path", "now", "item", "index"})
# Credentials the gateway authenticated with; never visible to templates, conditions, transforms.
HIDDEN_HEADERS = frozenset({"authorization", "x-service-token", "x-openclaw-token"})
HIDDEN_QUERY = frozenset({"token"})


class TemplateCompileError(ValueError):
    """A template that does not parse; the message names the line."""


class TemplateRenderError(Exception):
    """A template that failed while rendering; `reason` is safe to show (no payload data)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class MissingValueError(TemplateRenderError):
    """A value marked `| required` was missing or empty."""


class _Missing(jinja2.ChainableUndefined):
    """Undefined that renders empty and stays undefined through any chain of lookups."""

    __slots__ = ()

    def __str__(self) -> str:
        return ""


def _blocked(key: str) -> bool:
    return key in BLOCKED_KEYS or key.startswith("__")


class _DataSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, narrowed to JSON data: keys on mappings, safe methods on strings."""

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, Mapping):
            return self._key(obj, attribute)
        if isinstance(obj, str) and not attribute.startswith("_"):
            return super().getattr(obj, attribute)
        return self.undefined(obj=obj, name=attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        if isinstance(obj, Mapping):
            if isinstance(argument, str):
                return self._key(obj, argument)
            return self.undefined(obj=obj, name=str(argument))
        if isinstance(obj, (list, tuple, str)) and (
            isinstance(argument, slice)
            or (isinstance(argument, int) and not isinstance(argument, bool))
        ):
            try:
                return obj[argument]
            except IndexError:
                pass
        return self.undefined(obj=obj, name=str(argument))

    def _key(self, obj: Mapping[str, Any], key: str) -> Any:
        if _blocked(key):
            return self.undefined(name=key)
        try:
            return obj[key]
        except (KeyError, TypeError):
            return self.undefined(obj=obj, name=key)


def _json_default(value: Any) -> Any:
    if isinstance(value, jinja2.Undefined):
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def to_json(value: Any, indent: int | None = None) -> str:
    """JSON text of a value, as templates and the `tojson` filter produce it."""
    if isinstance(value, jinja2.Undefined):
        value = None
    separators = (",", ":") if indent is None else None
    return json.dumps(
        value, ensure_ascii=False, indent=indent, separators=separators, default=_json_default
    )


def _finalize(value: Any) -> Any:
    if value is None or isinstance(value, jinja2.Undefined):
        return ""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (dict, list, tuple)):
        return to_json(value)
    if isinstance(value, (str, int, float)):
        return value
    return ""  # functions, methods, template internals: never rendered


class _Required(Exception):
    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def _required(value: Any, message: str | None = None) -> Any:
    if value is None or value == "" or isinstance(value, jinja2.Undefined):
        name = getattr(value, "_undefined_name", None)
        raise _Required(
            message
            or (f"required value '{name}' is missing" if name else "a required value is missing")
        )
    return value


def _make_environment() -> _DataSandbox:
    env = _DataSandbox(
        autoescape=False,
        undefined=_Missing,
        finalize=_finalize,
        keep_trailing_newline=True,
    )
    for name in ("lipsum", "cycler", "joiner", "namespace"):
        env.globals.pop(name, None)
    env.filters["tojson"] = to_json
    env.filters["required"] = _required
    return env


_ENV = _make_environment()
# What a template sees beneath the request's variables (Jinja's `range`, `dict`). Rendering
# builds its context from one plain dict merge, where Jinja's `Template.render` copies the
# variables and walks a ChainMap of globals twice per call (a hot-path cost of mapped hooks).
_GLOBALS = dict(_ENV.globals)


# A template that is only text and references (`{{ name }}`, `{{ a.b }}`, `{{ a['b'] }}`,
# `{{ a[0] }}`) renders without Jinja, with the result the sandbox gives: a name or text key on a
# mapping is a key lookup (never a blocked key), a number indexes a list or a string, any other
# step or a missing value renders empty, and the value goes through `_finalize`. Names Jinja
# treats specially, and the environment's globals, always take Jinja's way.
_SPECIAL_NAMES = frozenset({"self", "loop", "caller", "varargs", "kwargs", "super", *_GLOBALS})
_MISSING = object()
_Part = str | tuple[str | int, ...]


def _reference(node: nodes.Node) -> tuple[str | int, ...] | None:
    keys: list[str | int] = []
    while True:
        if isinstance(node, nodes.Getattr):
            keys.append(node.attr)
            node = node.node
        elif (
            isinstance(node, nodes.Getitem)
            and isinstance(node.arg, nodes.Const)
            and isinstance(node.arg.value, (str, int))
            and not isinstance(node.arg.value, bool)
        ):
            keys.append(node.arg.value)
            node = node.node
        elif isinstance(node, nodes.Name) and node.ctx == "load":
            if node.name in _SPECIAL_NAMES:
                return None
            return (node.name, *reversed(keys))
        else:
            return None


def _plain_parts(source: str) -> tuple[_Part, ...] | None:
    """The template as literal text and references, when it is nothing else (else None)."""
    body = _ENV.parse(source).body
    if len(body) != 1 or not isinstance(body[0], nodes.Output):
        return None
    parts: list[_Part] = []
    for node in body[0].nodes:
        if isinstance(node, nodes.TemplateData):
            parts.append(node.data)
            continue
        reference = _reference(node)
        if reference is None:
            return None
        parts.append(reference)
    return tuple(parts)


def _render_plain(parts: tuple[_Part, ...], variables: Mapping[str, Any]) -> str:
    out = []
    for part in parts:
        if part.__class__ is str:
            out.append(part)
            continue
        value = variables.get(part[0], _MISSING)  # type: ignore[arg-type]
        if len(part) > 1:
            for key in part[1:]:
                if isinstance(key, int):
                    found = isinstance(value, (list, tuple, str)) and -len(value) <= key < len(
                        value
                    )
                else:
                    found = isinstance(value, Mapping) and not _blocked(key) and key in value
                if not found:
                    value = _MISSING
                    break
                value = value[key]
        if value.__class__ is str:
            out.append(value)
        elif value is not _MISSING:
            out.append(str(_finalize(value)))
    return "".join(out)


@attrs.frozen
class Template:
    """A compiled template; `render` turns template variables into text."""

    source: str
    _compiled: jinja2.Template | None = attrs.field(repr=False, eq=False)
    _plain: tuple[_Part, ...] | None = attrs.field(default=None, repr=False, eq=False)

    @property
    def is_constant(self) -> bool:
        return self._compiled is None

    def render(self, variables: Mapping[str, Any]) -> str:
        if self._compiled is None:
            return self.source
        compiled = self._compiled
        try:
            if self._plain is not None:
                return _render_plain(self._plain, variables)
            context = new_context(
                _ENV, compiled.name, compiled.blocks, {**_GLOBALS, **variables}, True, _GLOBALS
            )
            return _ENV.concat(compiled.root_render_func(context))
        except _Required as exc:
            raise MissingValueError(exc.what) from None
        except jinja2.exceptions.SecurityError:
            raise TemplateRenderError("template tried an unsafe operation") from None
        except jinja2.exceptions.UndefinedError:
            raise TemplateRenderError("template used a missing value in an operation") from None
        except Exception as exc:
            raise TemplateRenderError(f"template failed ({type(exc).__name__})") from None


def compile_template(source: str) -> Template:
    """Compile a template once, at load. Raises `TemplateCompileError` when it does not parse."""
    if "{{" not in source and "{%" not in source and "{#" not in source:
        return Template(source, None)
    try:
        return Template(source, _ENV.from_string(source), _plain_parts(source))
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateCompileError(
            f"template syntax error on line {exc.lineno}: {exc.message}"
        ) from None


def iso_now(now: datetime | None) -> str:
    """`now` as templates and transforms see it: ISO 8601, `Z` for UTC, milliseconds."""
    if now is None:
        return ""
    text = now.isoformat(timespec="milliseconds")
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def visible_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Headers with lower-cased names, the gateway's own credentials left out."""
    out = {}
    for k, v in headers.items():
        name = k.lower()
        if name not in HIDDEN_HEADERS:
            out[name] = v
    return out


def visible_query(query: Mapping[str, str]) -> dict[str, str]:
    """Query parameters, the `token` credential left out."""
    return {k: v for k, v in query.items() if k not in HIDDEN_QUERY}


def template_variables(
    payload: Mapping[str, Any] | list[Any],
    *,
    headers: Mapping[str, str],
    query: Mapping[str, str],
    path: str,
    now: str,
    extracted: Mapping[str, Any],
) -> dict[str, Any]:
    """The variables a template sees (see the module docstring for the precedence)."""
    fields = payload if isinstance(payload, Mapping) else {}  # an array has no bare names
    variables: dict[str, Any] = {
        k: v for k, v in fields.items() if isinstance(k, str) and not _blocked(k)
    }
    variables.update(extracted)
    variables["payload"] = payload
    variables["headers"] = headers
    variables["query"] = query
    variables["path"] = path
    variables["now"] = now
    return variables


class RequestView:
    """What templates and transforms see of a request beside its payload: its visible headers
    and query and the clock's text, each made on first use (a plain template that reads two
    payload fields needs none of them)."""

    __slots__ = ("_headers", "_now", "_query", "path", "request")

    def __init__(self, request: Any) -> None:
        self.request = request
        self.path: str = request.path
        self._headers: dict[str, str] | None = None
        self._query: dict[str, str] | None = None
        self._now: str | None = None

    @property
    def headers(self) -> dict[str, str]:
        if self._headers is None:
            self._headers = visible_headers(self.request.headers)
        return self._headers

    @property
    def query(self) -> dict[str, str]:
        if self._query is None:
            self._query = visible_query(self.request.query)
        return self._query

    @property
    def now(self) -> str:
        if self._now is None:
            self._now = iso_now(self.request.now)
        return self._now


class TemplateVariables(Mapping[str, Any]):
    """`template_variables` (same names, same precedence), resolved name by name as templates
    read them; `extra` (a fan-out's `item` and `index`) wins over everything."""

    __slots__ = ("_extra", "_extracted", "_fields", "_full", "_payload", "_view")

    def __init__(
        self,
        payload: Mapping[str, Any] | list[Any],
        extracted: Mapping[str, Any],
        view: RequestView,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self._payload = payload
        #: what bare names read: the payload's top-level keys (an array has none)
        self._fields = payload if isinstance(payload, Mapping) else _NO_FIELDS
        self._extracted = extracted
        self._view = view
        self._extra = extra
        self._full: dict[str, Any] | None = None

    def __getitem__(self, name: str) -> Any:
        value = self.get(name, _ABSENT)
        if value is _ABSENT:
            raise KeyError(name)
        return value

    def get(self, name: str, default: Any = None) -> Any:
        extra = self._extra
        if extra is not None and name in extra:
            return extra[name]
        if name in _REQUEST_NAMES:
            return self._payload if name == "payload" else getattr(self._view, name)
        extracted = self._extracted
        if extracted and name in extracted:
            return extracted[name]
        fields = self._fields
        if name in fields and isinstance(name, str) and not _blocked(name):
            return fields[name]
        return default

    def __contains__(self, name: object) -> bool:
        return self.get(name, _ABSENT) is not _ABSENT  # type: ignore[arg-type]

    def _all(self) -> dict[str, Any]:
        if self._full is None:
            view = self._view
            full = template_variables(
                self._payload,
                headers=view.headers,
                query=view.query,
                path=view.path,
                now=view.now,
                extracted=self._extracted,
            )
            if self._extra is not None:
                full.update(self._extra)
            self._full = full
        return self._full

    def __iter__(self) -> Any:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


_REQUEST_NAMES = frozenset({"payload", "headers", "query", "path", "now"})
_NO_FIELDS: Mapping[str, Any] = {}
_ABSENT = object()

"""The model policy: which `model` a request may select, and what an alias stands for.

`agents.defaults.models` is the allowlist: a list of `provider/model` strings, or a map of them
to `{alias: ...}`. Empty or absent means any model is allowed, though a request's value must
still be `provider/model` or a known alias. `agents.defaults.model` (default `echo/echo`, may be
an alias) is the default and is always allowed.

`agents.defaults.fallbacks` (or `model` given as a list: its first item is the model, the
others the fallbacks) are the models a run tries in turn when the one before is unavailable;
like the default, they are always allowed. `resolve_chain` resolves a request's chain
(`model: [a, b]`, or `model` with `fallbacks`), each item as `resolve` does.

`ModelPolicy.resolve(ref)` returns the canonical `provider/model`, or raises `Refusal`:
`invalid_field` for a value that is not a non-blank string of that form, `model_not_allowed` for
one outside the allowlist, `model_not_available` for one whose provider is not configured (when
the policy knows the providers: `models.providers` and the built-in `echo`), so that a run that
could only fail is refused at the door. Pure: data in, data out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import attrs

from ..errors import ConfigError, ConfigIssue, Refusal
from .models import AgentDefaults

_MODEL_REF = re.compile(r"[^\s/]+/\S+")


def is_model_ref(value: str) -> bool:
    """Whether `value` has the `provider/model` form (no whitespace, both parts non-empty)."""
    return _MODEL_REF.fullmatch(value) is not None


@attrs.frozen
class ModelPolicy:
    """The default model, the allowlist (empty: any model) and the aliases."""

    default_model: str = "echo/echo"
    allowed: frozenset[str] = frozenset()
    aliases: dict[str, str] = attrs.field(factory=dict)
    #: the configured provider ids (None: not checked)
    providers: frozenset[str] | None = None
    #: the models tried after the default one, in order, when it is unavailable
    fallbacks: tuple[str, ...] = ()

    @property
    def default_chain(self) -> tuple[str, ...]:
        """The default model and its fallbacks, in the order they are tried."""
        return (self.default_model, *self.fallbacks)

    @property
    def enforced(self) -> bool:
        """Whether an allowlist restricts the models."""
        return bool(self.allowed)

    @classmethod
    def from_config(
        cls, defaults: AgentDefaults, providers: Iterable[str] | None = None
    ) -> ModelPolicy:
        """The policy of `agents.defaults`; raises `ConfigError` naming the bad key. With
        `providers` (the configured ids), a model of another provider is not available."""
        issues: list[ConfigIssue] = []
        allowed: set[str] = set()
        aliases: dict[str, str] = {}
        models = defaults.models
        entries = (
            [(f"agents.defaults.models[{i}]", ref, None) for i, ref in enumerate(models)]
            if isinstance(models, tuple)
            else [(f"agents.defaults.models.{ref}", ref, e.alias) for ref, e in models.items()]
        )
        for path, ref, alias in entries:
            ref = ref.strip()
            if not is_model_ref(ref):
                issues.append(ConfigIssue(path, f"{ref!r} is not of the form provider/model"))
                continue
            allowed.add(ref)
            if alias is None:
                continue
            alias = alias.strip()
            if not alias or any(c.isspace() for c in alias):
                issues.append(ConfigIssue(f"{path}.alias", "must be a non-blank word"))
            elif alias in aliases and aliases[alias] != ref:
                issues.append(
                    ConfigIssue(
                        f"{path}.alias", f"{alias!r} is already the alias of {aliases[alias]}"
                    )
                )
            else:
                aliases[alias] = ref
        for alias, ref in aliases.items():
            if alias in allowed and alias != ref:
                issues.append(
                    ConfigIssue(
                        f"agents.defaults.models.{ref}.alias",
                        f"{alias!r} is itself an allowed model; an alias must not shadow one",
                    )
                )
        default = defaults.model.strip()
        default = aliases.get(default, default)
        if not is_model_ref(default):
            issues.append(
                ConfigIssue(
                    "agents.defaults.model", f"{defaults.model!r} is not provider/model or an alias"
                )
            )
        fallbacks: list[str] = []
        for i, ref in enumerate(defaults.fallbacks):
            canonical = aliases.get(ref.strip(), ref.strip())
            if not is_model_ref(canonical):
                issues.append(
                    ConfigIssue(
                        f"agents.defaults.fallbacks[{i}]",
                        f"{ref!r} is not provider/model or an alias",
                    )
                )
            elif canonical != default and canonical not in fallbacks:
                fallbacks.append(canonical)
        if issues:
            raise ConfigError(issues)
        return cls(
            default_model=default,
            allowed=frozenset(allowed),
            aliases=aliases,
            providers=None if providers is None else frozenset(providers),
            fallbacks=tuple(fallbacks),
        )

    def unavailable(self) -> list[ConfigIssue]:
        """The default model and allowlist entries whose provider is not configured."""
        if self.providers is None:
            return []
        refs = [("agents.defaults.model", self.default_model)]
        refs += [(f"agents.defaults.fallbacks[{i}]", r) for i, r in enumerate(self.fallbacks)]
        refs += [(f"agents.defaults.models.{ref}", ref) for ref in sorted(self.allowed)]
        return [
            ConfigIssue(path, self._unavailable_message(ref))
            for path, ref in refs
            if ref.partition("/")[0] not in self.providers
        ]

    def _unavailable_message(self, ref: str) -> str:
        provider = ref.partition("/")[0]
        known = ", ".join(sorted(self.providers or ()))
        return (
            f"model {_show(ref)} names the provider {_show(provider)}, which is not configured "
            f"under models.providers (configured: {known})"
        )

    def resolve(self, ref: object) -> str:
        """The canonical `provider/model` for a request's `model`; None means the default."""
        if ref is None:
            return self.default_model
        if not isinstance(ref, str):
            raise Refusal("invalid_field", "model must be a string", field="model")
        value = ref.strip()
        if not value:
            raise Refusal("invalid_field", "model must not be blank", field="model")
        canonical = self.aliases.get(value, value)
        if not is_model_ref(canonical):
            raise Refusal(
                "invalid_field",
                f"model {_show(value)} must be <provider>/<model> or a known alias",
                field="model",
            )
        if self.enforced and canonical not in self.allowed and canonical not in self.default_chain:
            raise Refusal(
                "model_not_allowed",
                f"model {_show(value)} is not allowed; allowed models: "
                f"{', '.join(sorted(self.allowed | {self.default_model}))}",
                field="model",
            )
        if self.providers is not None and canonical.partition("/")[0] not in self.providers:
            raise Refusal(
                "model_not_available", self._unavailable_message(canonical), field="model"
            )
        return canonical

    def resolve_chain(self, ref: object, fallbacks: object = None) -> tuple[str, ...] | None:
        """A request's model chain: `ref` a model or a list of them, `fallbacks` a list tried
        after it; each item resolved and checked as `resolve` does, duplicates dropped. None
        when neither is given (the agent's own chain applies)."""
        if ref is None and fallbacks is None:
            return None
        items: list[tuple[str, object]] = []
        if isinstance(ref, list):
            if not ref:
                raise Refusal("invalid_field", "model must not be empty", field="model")
            items += [(f"model[{i}]", r) for i, r in enumerate(ref)]
        else:
            items.append(("model", ref))
        if fallbacks is not None:
            if not isinstance(fallbacks, list):
                raise Refusal(
                    "invalid_field", "fallbacks must be a list of models", field="fallbacks"
                )
            items += [(f"fallbacks[{i}]", r) for i, r in enumerate(fallbacks)]
        if len(items) > MAX_CHAIN:
            raise Refusal(
                "invalid_field", f"a model chain has at most {MAX_CHAIN} models", field="model"
            )
        chain: list[str] = []
        for field, item in items:
            if item is None and field == "model":
                canonical = self.default_model
            else:
                try:
                    canonical = self.resolve(item)
                except Refusal as e:
                    raise Refusal(e.code, e.message, field=field) from None
            if canonical not in chain:
                chain.append(canonical)
        return tuple(chain)


def model_list(block: object, where: str, issues: list[ConfigIssue]) -> object:
    """`block` with `model: [a, b, c]` read as `model: a, fallbacks: [b, c]`."""
    if not isinstance(block, dict) or not isinstance(block.get("model"), list):
        return block
    chain = block["model"]
    if not chain or not all(isinstance(m, str) for m in chain):
        issues.append(ConfigIssue(f"{where}.model", "a model list must be non-empty strings"))
        return {k: v for k, v in block.items() if k != "model"}
    if "fallbacks" in block:
        issues.append(
            ConfigIssue(f"{where}.fallbacks", "give model as a list or fallbacks, not both")
        )
        return {k: v for k, v in block.items() if k not in ("model", "fallbacks")}
    return {**block, "model": chain[0], "fallbacks": list(chain[1:])}


#: the most models one chain may name
MAX_CHAIN = 8


def _show(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:79] + "…")

"""The door of a mapped path: which verify block guards it, and how retries are deduplicated.

A path's door is its `hooks.verify.<path>` block (every request on the path must carry the
signature, whichever rule it reaches, so that a rule added later without `verify` cannot open
the path), or else the verify block of the first rule whose `match.path` is that path. A door
answers the provider's handshakes; it checks every request on the path when it is path-level or
when it authenticates by signature (`auth: signature`), and otherwise leaves the check to the
rule that is selected.

`Dedupe` finds a request's delivery id, used as its idempotency key when the request sends no
`Idempotency-Key`: the scheme's id (`provider`, the default, and only once a signature was
verified, so nobody can burn an id in advance), a header, a JSONPath, or none (`off`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

import attrs

from ..config.mapping import DedupeConfig, MappingConfig, VerifyConfig
from ..errors import ConfigError, ConfigIssue
from ..request import BUILT_IN_HOOKS, InboundRequest
from ..rules.extract import JsonPath, JsonPathError, compile_jsonpath
from .compile import compile_verifier
from .core import Verifier

MAX_DELIVERY_ID = 200


@attrs.frozen
class Door:
    """The verify block guarding one path."""

    verifier: Verifier
    rule_id: str | None  # None for a path-level block
    path_level: bool

    @property
    def checks_every_request(self) -> bool:
        return self.path_level or self.verifier.signature_auth


def compile_doors(
    blocks: Mapping[str, VerifyConfig],
    rules: Iterable[tuple[str, str | None, Verifier | None]],
    base_dir: Path,
) -> tuple[dict[str, Door], list[ConfigIssue]]:
    """Doors by path from `hooks.verify` and from (rule id, match.path, verifier) in order."""
    doors: dict[str, Door] = {}
    issues: list[ConfigIssue] = []
    for given, block in blocks.items():
        path = given.strip().strip("/")
        where = f"hooks.verify.{given}"
        if not path or path in BUILT_IN_HOOKS:
            issues.append(ConfigIssue(where, "must name a mapped path (not empty, wake or agent)"))
            continue
        try:
            doors[path] = Door(compile_verifier(block, base_dir, where), None, True)
        except ConfigError as exc:
            issues.extend(exc.issues)
    for rule_id, rule_path, verifier in rules:
        if verifier is None or rule_path is None:
            continue
        if rule_path not in doors:
            doors[rule_path] = Door(verifier, rule_id, False)
        elif verifier.signature_auth and doors[rule_path].verifier is not verifier:
            # a later block cannot change how the path authenticates
            issues.append(
                ConfigIssue(
                    f"{verifier.where}.auth",
                    f"auth: signature must be on the block that guards the path {rule_path!r} "
                    "(its hooks.verify block, or the first rule on it with verify)",
                    rule_id=rule_id,
                )
            )
    return doors, issues


@attrs.frozen
class Dedupe:
    """A rule's compiled `dedupe`."""

    mode: Literal["off", "provider", "header", "jsonpath"] = "provider"
    header: str | None = None
    path: JsonPath | None = None

    def delivery_id(self, request: InboundRequest, verified: Verifier | None) -> str | None:
        """The id of this delivery, or None (no deduplication)."""
        value: object = None
        if self.mode == "provider" and verified is not None:
            value = verified.delivery_id(request)
        elif self.mode == "header" and self.header is not None:
            value = request.headers.get(self.header.lower())
        elif self.mode == "jsonpath" and self.path is not None:
            value = self.path.first(request.payload)
        if isinstance(value, bool) or not isinstance(value, str | int):
            return None
        text = str(value).strip()
        return text if 0 < len(text) <= MAX_DELIVERY_ID and text.isprintable() else None


def compile_dedupe(config: MappingConfig, where: str) -> Dedupe:
    """A mapping's `dedupe` (default: the provider's delivery id)."""
    given = config.dedupe
    if given is None or given == "provider":
        return Dedupe()
    if given == "off":
        return Dedupe("off")
    assert isinstance(given, DedupeConfig)
    if (given.header is None) == (given.jsonpath is None):
        raise ConfigError([ConfigIssue(f"{where}dedupe", "give exactly one of header or jsonpath")])
    if given.header is not None:
        if not given.header.strip():
            raise ConfigError([ConfigIssue(f"{where}dedupe.header", "must not be empty")])
        return Dedupe("header", header=given.header.strip())
    try:
        return Dedupe("jsonpath", path=compile_jsonpath(given.jsonpath or ""))
    except JsonPathError as exc:
        raise ConfigError([ConfigIssue(f"{where}dedupe.jsonpath", str(exc))]) from None

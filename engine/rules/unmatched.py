"""What a mapped path does with a request that none of its rules matched (`unmatched`).

A mapping may say `unmatched: acknowledge | reject`; like a limit it belongs to the path, not to
one rule, so the rules of one path must agree (`path_unmatched` refuses two that do not, or the
key on a rule without `match.path`). Unsaid, a path guarded by a signature block (a door)
acknowledges, because its sender (GitHub, Stripe) sends every event type it was subscribed to and
treats anything but a 2xx as a failure to retry; any other path rejects, as before.

`token_warnings` warns (at load: `config check`, `rules check`, `serve`) about a signature block of
a provider that cannot send the hook token and lacks `auth: signature`: its deliveries would all
be refused `401` unless their URL carries `?token=`.

`why_unmatched` says why a request was not matched, for the refusal's message: which rules exist
for the path and the condition of each that failed (the console's rule tester says the same),
never a payload value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from ..errors import ConfigIssue
from ..request import InboundRequest
from ..signatures.door import Door
from .rule import CompiledRule

#: the schemes whose sender is yours to program (it can send `Authorization: Bearer ...`); every
#: provider's own scheme signs deliveries it cannot add the hook token to (no custom header)
SENDS_HOOK_TOKEN = frozenset({"hmac", "hmac-sha256"})

Unmatched = Literal["acknowledge", "reject"]
#: at most this many rules are named in a refusal's message
_NAMED = 5


def path_unmatched(
    rules: Iterable[tuple[str, str | None, Unmatched | None]],
) -> tuple[dict[str, Unmatched], list[ConfigIssue]]:
    """From (rule id, path, unmatched) of each rule: the choice by path, and the problems."""
    by_path: dict[str, tuple[str, Unmatched]] = {}
    issues: list[ConfigIssue] = []
    for rule_id, path, given in rules:
        if given is None:
            continue
        if path is None:
            issues.append(
                ConfigIssue(
                    "unmatched",
                    "unmatched belongs to a path: give the rule a match.path",
                    rule_id=rule_id,
                )
            )
            continue
        key = path.strip("/")
        seen = by_path.get(key)
        if seen is None:
            by_path[key] = (rule_id, given)
        elif seen[1] != given:
            issues.append(
                ConfigIssue(
                    "unmatched",
                    f"path {key!r} already says unmatched: {seen[1]} (rule {seen[0]!r}); the "
                    "rules of one path share it",
                    rule_id=rule_id,
                )
            )
    return {k: v for k, (_, v) in by_path.items()}, issues


def why_unmatched(rules: Sequence[CompiledRule], request: InboundRequest) -> str:
    """The refusal's message for a request no rule matched."""
    path = request.path.strip("/")
    candidates = [r for r in rules if r.path is None or r.path == path]
    if not candidates:
        return f"no hook or mapping matches {path!r}"
    reasons = [f"rule {r.id!r}: {r.why_not(request)}" for r in candidates[:_NAMED]]
    more = len(candidates) - _NAMED
    if more > 0:
        reasons.append(f"and {more} more")
    count = (
        f"{len(candidates)} rules for {path!r} exist"
        if len(candidates) > 1
        else (f"1 rule for {path!r} exists")
    )
    return f"{count} but none matched this request: " + "; ".join(reasons)


def token_warnings(doors: Mapping[str, Door]) -> list[str]:
    """One line per door of a provider that cannot send the hook token, without `auth: signature`."""
    out = []
    for path, door in sorted(doors.items()):
        v = door.verifier
        if v.signature_auth or v.scheme.name in SENDS_HOOK_TOKEN:
            continue
        rule = f" (rule {door.rule_id!r})" if door.rule_id else ""
        out.append(
            f"{v.where}{rule}: {v.scheme.name} cannot send the hook token, so every delivery to "
            f"{{hook_path}}/{path} is refused 401 unless its URL carries ?token=: add "
            "`auth: signature` to let the valid signature stand in for the token"
        )
    return out

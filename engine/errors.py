"""The engine's error types: problems found in configuration, and problems found in a request.

`ConfigError` gathers every problem found while loading or compiling configuration, each with the
key path (and, for rule files, the file and rule id) that names where it is.  `Refusal` is the
engine's typed refusal of one inbound request: a stable code, a sentence, the field and the rule,
but no HTTP status: the server's ingress chooses the status from the code
(`hookwise.server.ingress.refusals`). `RequestError` is the server's refusal, status included,
which it turns into the one JSON error shape; the engine never raises it.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class ConfigIssue:
    """One problem in configuration: where it is and what is wrong."""

    path: str
    message: str
    file: str | None = None
    rule_id: str | None = None

    def __str__(self) -> str:
        where = self.path or "(top level)"
        prefix = ""
        if self.file:
            prefix += f"{self.file}: "
        if self.rule_id:
            prefix += f"rule {self.rule_id!r}: "
        return f"{prefix}{where}: {self.message}"


class ConfigError(Exception):
    """Configuration that cannot be used; carries every problem found, not just the first."""

    def __init__(self, issues: list[ConfigIssue]) -> None:
        self.issues = list(issues)
        super().__init__("\n".join(str(i) for i in self.issues))


@attrs.frozen
class Refusal(Exception):
    """A request the engine refuses: a stable code and a sentence for a person; `field` names the
    offending payload field, `rule_id` the mapping that refused it. No HTTP status."""

    code: str
    message: str
    field: str | None = None
    rule_id: str | None = None

    def __str__(self) -> str:
        return self.message

    def to_body(self) -> dict[str, object]:
        """The one error shape's body (`ok`, `error`, `code`, and `field`, `rule` when known)."""
        return error_body(self.message, self.code, self.field, self.rule_id)


@attrs.frozen
class RequestError(Exception):
    """A request the service refuses: HTTP status, stable code, a sentence for a person.

    `field` names the offending payload field for validation errors; `rule_id` names the mapping
    that produced the action, for mapped hooks.
    """

    status: int
    code: str
    message: str
    field: str | None = None
    rule_id: str | None = None

    def __str__(self) -> str:
        return self.message

    def to_body(self) -> dict[str, object]:
        return error_body(self.message, self.code, self.field, self.rule_id)


def error_body(
    message: str, code: str, field: str | None, rule_id: str | None
) -> dict[str, object]:
    """The one error shape: `{"ok": false, "error", "code"}`, plus `field` and `rule` when known."""
    body: dict[str, object] = {"ok": False, "error": message, "code": code}
    if field is not None:
        body["field"] = field
    if rule_id is not None:
        body["rule"] = rule_id
    return body

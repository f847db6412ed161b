"""The engine's error types: problems found in configuration, and problems found in a request.

`ConfigError` gathers every problem found while loading or compiling configuration, each with the
key path (and, for rule files, the file and rule id) that names where it is.  `RequestError` is a
problem with one inbound request; the server turns it into the one JSON error shape.
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
        body: dict[str, object] = {"ok": False, "error": self.message, "code": self.code}
        if self.field is not None:
            body["field"] = self.field
        if self.rule_id is not None:
            body["rule"] = self.rule_id
        return body

"""Reading YAML: one library (ruamel.yaml) and one YAML version (1.2) for every file hookwise
reads, the same that `hookwise webhooks gmail setup` and `hookwise init` write with.

YAML 1.1 (PyYAML) reads `on`, `off`, `yes`, `no` as booleans and `0755` as an octal number; 1.2
reads them as the strings and the decimal they look like. Reading one version and writing another
would change a value on its way through a round trip (`label: on` became `true`). Syntax errors
name the file, line and column.
"""

from __future__ import annotations

from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError


class YamlSyntaxError(ValueError):
    """Text that is not YAML: where (1-based line and column, when known) and what."""

    def __init__(self, name: str, problem: str, line: int | None = None, column: int | None = None):
        self.name, self.problem, self.line, self.column = name, problem, line, column
        super().__init__(f"{name}:{line}:{column}: {problem}" if line else f"{name}: {problem}")

    @property
    def where(self) -> str:
        """`line 3, column 7: <problem>` (or just the problem when the position is unknown)."""
        return (
            f"line {self.line}, column {self.column}: {self.problem}" if self.line else self.problem
        )


def _reader() -> YAML:
    # `pure`: ruamel's C reader follows YAML 1.1's implicit types; the pure one is 1.2.
    yaml = YAML(typ="safe", pure=True)
    yaml.allow_duplicate_keys = False
    return yaml


def load_yaml(text: str, name: str) -> Any:
    """Parse one YAML document into plain dicts, lists and scalars. `name` (the file) is named
    in errors, with the 1-based line and column of the problem."""
    try:
        return _reader().load(text)
    except MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = e.problem or e.context or "invalid YAML"
        if mark is None:
            raise YamlSyntaxError(name, problem) from None
        raise YamlSyntaxError(name, problem, mark.line + 1, mark.column + 1) from None
    except YAMLError as e:
        raise YamlSyntaxError(name, str(e)) from None

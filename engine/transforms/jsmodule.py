"""Turning a transform's module text into a script V8 can evaluate (mini-racer has no modules).

Done once, at load. The module body runs inside a strict-mode function (ES modules are strict),
and its exports are collected into an object:

- `export default function name(...)` / `export default async function (...)` /
  `export default <expression>` become the `default` export;
- `export function f`, `export async function f`, `export class C`, `export const|let|var x = ...`
  (one binding per statement) and `export { a, b as c }` become named exports;
- CommonJS style (`module.exports = fn`, `exports.transform = fn`) works too.

`import` statements and `export ... from` are refused: a transform has no module loader and no
host to import from. Export statements are recognised at the start of a line.
"""

from __future__ import annotations

import re

_IDENT = r"[A-Za-z_$][\w$]*"
_IMPORT = re.compile(
    r"^[ \t]*(import(?:\s+[\w$]|\s*[{*'\"])|export\s*\*|export\s*\{[^}]*\}\s*from\b)", re.M
)
_DEFAULT_NAMED = re.compile(
    r"^([ \t]*)export\s+default\s+"
    rf"((?:async\s+)?function\s*\*?\s*({_IDENT})\s*\(|class\s+({_IDENT})\b)",
    re.M,
)
_DEFAULT = re.compile(r"^([ \t]*)export\s+default\s+", re.M)
_DECL = re.compile(
    r"^([ \t]*)export\s+"
    rf"((?:async\s+)?function\s*\*?\s*({_IDENT})|class\s+({_IDENT})|(?:const|let|var)\s+({_IDENT}))",
    re.M,
)
_LIST = re.compile(r"^([ \t]*)export\s*\{([^}]*)\}\s*;?", re.M)
_EXPORTS_VAR = "__hw_e"


class ModuleSyntaxError(ValueError):
    """Module text that cannot become a transform script."""


def module_to_script(source: str, result_var: str) -> str:
    """A script that evaluates `source` and stores `[namedExports, module.exports]` in
    `result_var` (a global)."""
    found = _IMPORT.search(source)
    if found:
        line = source.count("\n", 0, found.start()) + 1
        raise ModuleSyntaxError(
            f"line {line}: `import` is not available to transforms (no module loader); "
            "bundle the module into one file"
        )
    trailer: list[str] = []

    def default_named(m: re.Match[str]) -> str:
        trailer.append(f"{_EXPORTS_VAR}.default = {m.group(3) or m.group(4)};")
        return m.group(1) + m.group(2)

    body = _DEFAULT_NAMED.sub(default_named, source)
    body = _DEFAULT.sub(lambda m: f"{m.group(1)}{_EXPORTS_VAR}.default = ", body)

    def declaration(m: re.Match[str]) -> str:
        name = m.group(3) or m.group(4) or m.group(5)
        trailer.append(f"{_EXPORTS_VAR}[{name!r}] = {name};")
        return m.group(1) + m.group(2)

    body = _DECL.sub(declaration, body)

    def listing(m: re.Match[str]) -> str:
        for spec in m.group(2).split(","):
            spec = spec.strip()
            if not spec:
                continue
            local, _, exported = (s.strip() for s in spec.partition(" as "))
            exported = exported or local
            if not re.fullmatch(_IDENT, local) or not re.fullmatch(_IDENT + "|default", exported):
                raise ModuleSyntaxError(f"cannot read export list entry {spec!r}")
            trailer.append(f"{_EXPORTS_VAR}[{exported!r}] = {local};")
        return m.group(1)

    body = _LIST.sub(listing, body)
    return (
        f"var {result_var} = (function () {{\n"
        '"use strict";\n'
        "var module = { exports: {} }; var exports = module.exports;\n"
        f"const {_EXPORTS_VAR} = {{}};\n"
        f"{body}\n;\n"
        + "\n".join(trailer)
        + f"\nreturn [{_EXPORTS_VAR}, module.exports];\n}})();\n"
    )

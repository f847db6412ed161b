"""TypeScript transforms (`.ts`, `.mts`, `.cts`): compiled to one JavaScript script at load.

The compiler is TypeScript's own (`ts.transpileModule`, the `typescriptServices.js` that the
`dukpy` package ships: a file read from the installed package, nothing fetched at run time, no
Node), run in a V8 context of mini-racer in the loading process. It strips the types (types,
interfaces, generics, `as`, `satisfies`) and compiles what has a run-time meaning (enums,
`const enum`, namespaces, parameter properties) as `tsc` does with `isolatedModules`; it does
NOT check types (as `esbuild`, `swc` or Node's type stripping do not): run `tsc --noEmit` in your
editor or CI for that. A syntax error is a load error naming `file.ts:line:column`.

A module may import its sibling modules (`import { x } from "./util"`, `"./util.js"` or
`"./util.ts"`, `.ts`/`.mts`/`.cts`/`.js`/`.mjs`/`.cjs`) inside `hooks.transformsDir` (the same
confinement as `transform.module`: no `..` out, symlinks resolved); the imports are resolved and
bundled at load into one script with a tiny CommonJS loader, so the sandbox still has no module
loader at run time. Anything else (`node:fs`, a package name) is refused at load.

A module is at most `MAX_SOURCE_BYTES` (512 KiB): the compiler runs in the loading process, and
compiling grows it by about 120 MB per MiB of source (measured: 0.25 MiB +43 MB in 1.3 s, 1 MiB
+125 MB in 6.3 s, on top of the ~130 MB of a process with the compiler up), so a larger module
is a load error naming its size, never a gateway that grows by half a gigabyte.

Compiled output is cached by content (the compiler's version, the file's name and text), for the
life of the process: a reload that changed no `.ts` file compiles nothing, and the compiler's
context (about 100 MB, 0.7 s to start) is only started on a miss and closed when the rule set is
loaded (`TsCompiler.close`).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
from pathlib import Path
from typing import Any

from ._paths import resolve_module
from .base import TransformLoadError

TS_SUFFIXES = (".ts", ".mts", ".cts")
_IMPORTABLE = (*TS_SUFFIXES, ".js", ".mjs", ".cjs")
_REQUIRE = re.compile(r'\brequire\("((?:[^"\\]|\\.)*)"\)')
# CommonJS output (its `require` calls are the import graph), modern syntax kept as written.
_TRANSPILE = """(function (src, name) {
  const r = ts.transpileModule(src, {
    fileName: name, reportDiagnostics: true,
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022,
                       isolatedModules: true, esModuleInterop: false, removeComments: false },
  });
  return JSON.stringify({ js: r.outputText, errors: (r.diagnostics || []).map(
    (d) => [d.start === undefined ? -1 : d.start, ts.flattenDiagnosticMessageText(d.messageText, " ")]) });
})"""
_MAX_MODULES = 200
#: the largest TypeScript module compiled (bytes; see the module docstring)
MAX_SOURCE_BYTES = 512 * 1024

#: compiled JavaScript by content key, for the life of the process
_compiled: dict[str, str] = {}


def _compiler_file() -> Path:
    spec = importlib.util.find_spec("dukpy")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    for location in locations:
        path = Path(location) / "jsmodules" / "typescriptServices.js"
        if path.is_file():
            return path
    raise TransformLoadError(
        "TypeScript transforms need the TypeScript compiler shipped by the 'dukpy' package"
        " (pip install dukpy)"
    )


def _compiler_version() -> str:
    try:
        return importlib.metadata.version("dukpy")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class TsCompiler:
    """TypeScript's `transpileModule` in a V8 context, started on the first cache miss."""

    def __init__(self) -> None:
        self._mr: Any = None
        self._version = _compiler_version()

    def compile(self, name: str, source: str) -> str:
        """The JavaScript (CommonJS) of one module; `TransformLoadError` naming
        `name:line:column` for a syntax error."""
        key = hashlib.sha256(
            json.dumps([self._version, name, source]).encode("utf-8", "surrogatepass")
        ).hexdigest()
        hit = _compiled.get(key)
        if hit is not None:
            return hit
        # `.mts`/`.mjs` name ES modules to TypeScript, which would then keep their `export`s:
        # compiled under a `.ts`/`.js` name, every module comes out as CommonJS
        as_cjs = re.sub(r"\.[mc](ts|js)$", r".\1", name)
        call = f"{_TRANSPILE}({json.dumps(source)}, {json.dumps(as_cjs)})"
        out = json.loads(self._context().eval(call))
        if out["errors"]:
            start, message = out["errors"][0]
            where = name
            if start >= 0:
                line = source.count("\n", 0, start) + 1
                column = start - (source.rfind("\n", 0, start) + 1) + 1
                where = f"{name}:{line}:{column}"
            more = len(out["errors"]) - 1
            raise TransformLoadError(
                f"{where}: {message}" + (f" (and {more} more)" if more else "")
            )
        _compiled[key] = out["js"]
        return str(out["js"])

    def _context(self) -> Any:
        if self._mr is None:
            from py_mini_racer import MiniRacer

            mr = MiniRacer()
            try:
                mr.eval(_compiler_file().read_text(encoding="utf-8"))
            except BaseException:
                mr.close()
                raise
            self._mr = mr
        return self._mr

    def close(self) -> None:
        if self._mr is not None:
            self._mr.close()
            self._mr = None


def _target(importer: Path, spec: str, base: Path) -> Path:
    """The module `spec` (imported by `importer`) names inside `base`."""
    if not spec.startswith(("./", "../")):
        raise TransformLoadError(
            f"{importer.relative_to(base).as_posix()}: import {spec!r}: a transform may import"
            " only its sibling modules inside transformsDir ('./name')"
        )
    stem = importer.parent / spec
    candidates = []
    if stem.suffix in _IMPORTABLE:
        candidates.append(stem)
        if stem.suffix in (".js", ".mjs", ".cjs"):  # TypeScript's convention: ./util.js -> util.ts
            candidates.append(stem.with_suffix(stem.suffix.replace("js", "ts")))
    candidates += [stem.with_name(stem.name + s) for s in _IMPORTABLE]
    for candidate in candidates:
        rel = os.path.relpath(candidate, base)
        if rel.startswith(".."):
            raise TransformLoadError(
                f"{importer.relative_to(base).as_posix()}: import {spec!r} leaves transformsDir"
            )
        if candidate.is_file():
            return resolve_module(base, rel)
    raise TransformLoadError(
        f"{importer.relative_to(base).as_posix()}: import {spec!r}: no such module in transformsDir"
    )


def bundle(entry: Path, transforms_dir: Path, compiler: TsCompiler, result_var: str) -> str:
    """One script that evaluates `entry` (and the sibling modules it imports) and stores
    `[exports, exports]` in `result_var`, as `jsmodule.module_to_script` does for a `.js`."""
    base = transforms_dir.resolve()
    bodies: dict[str, str] = {}
    links: dict[str, dict[str, str]] = {}
    todo = [entry]
    while todo:
        path = todo.pop()
        mid = path.relative_to(base).as_posix()
        if mid in bodies:
            continue
        if len(bodies) >= _MAX_MODULES:
            raise TransformLoadError(f"{entry.name}: imports more than {_MAX_MODULES} modules")
        try:
            size = path.stat().st_size
            if size > MAX_SOURCE_BYTES and path.suffix in TS_SUFFIXES:
                raise TransformLoadError(
                    f"{mid}: {size} bytes, over the {MAX_SOURCE_BYTES // 1024} KiB limit of a"
                    " TypeScript module (compiling costs about 120 MB per MiB; split it, or"
                    " ship it compiled as .js)"
                )
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TransformLoadError(f"cannot read transform module {mid}: {exc}") from None
        js = compiler.compile(mid, source)
        bodies[mid] = js
        links[mid] = {}
        for spec in dict.fromkeys(json.loads(f'"{s}"') for s in _REQUIRE.findall(js)):
            target = _target(path, spec, base)
            links[mid][spec] = target.relative_to(base).as_posix()
            todo.append(target)
    defs = "".join(
        f"defs[{json.dumps(mid)}] = function (module, exports, require) {{\n{js}\n}};\n"
        for mid, js in bodies.items()
    )
    entry_id = entry.resolve().relative_to(base).as_posix()
    return (
        f"var {result_var} = (function () {{\n"
        '"use strict";\n'
        "const defs = {}; const cache = {};\n"
        f"{defs}"
        f"const links = {json.dumps(links)};\n"
        "function load(id) {\n"
        "  const hit = cache[id]; if (hit !== undefined) return hit.exports;\n"
        "  const module = { exports: {} }; cache[id] = module;\n"
        "  defs[id].call(undefined, module, module.exports,\n"
        "    function (spec) { return load(links[id][spec]); });\n"
        "  return module.exports;\n"
        "}\n"
        f"const e = load({json.dumps(entry_id)});\n"
        "return [e, e];\n"
        "})();\n"
    )

"""TypeScript transforms at load: what compiling costs, and what the content cache saves.

    .venv/bin/python bench/typescript.py

Writes a transform (types, an interface, an enum, an import of a sibling module) to a scratch
transformsDir and measures, in one process: starting the compiler (TypeScript's
typescriptServices.js evaluated in a fresh V8 context), the first compile of the bundle (V8 still
cold), a second compile of changed text (warm), and a compile served from the content cache (a
reload that changed no `.ts`), plus the process's peak RSS. Last line: `BENCH_JSON {...}`.
"""

from __future__ import annotations

import json
import resource
import tempfile
import time
from pathlib import Path

from hookwise.engine.transforms import typescript

ENTRY = """import { label, Severity } from "./util";
interface Ctx { payload: { service?: string; severity: number } }
enum Kind { Wake = "wake", Agent = "agent" }
export default function route(ctx: Ctx) {
  return ctx.payload.severity === Severity.Critical
    ? { kind: Kind.Agent, message: label(ctx.payload) }
    : { kind: Kind.Wake, text: label(ctx.payload) };
}
"""
UTIL = """export enum Severity { Info = 1, Critical = 3 }
export function label(p: { service?: string; severity: number }): string {
  return `[${Severity[p.severity] ?? "?"}] ${p.service ?? "unknown"}`;
}
"""


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 1)


def main() -> None:
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "route.ts").write_text(ENTRY, encoding="utf-8")
        (base / "util.ts").write_text(UTIL, encoding="utf-8")
        compiler = typescript.TsCompiler()
        try:
            start = time.perf_counter()
            compiler._context()
            figures["compiler_start_ms"] = _ms(start)
            start = time.perf_counter()
            typescript.bundle(base / "route.ts", base, compiler, "__m")
            figures["first_bundle_ms"] = _ms(start)
            (base / "route.ts").write_text(ENTRY + "\n// changed\n", encoding="utf-8")
            start = time.perf_counter()
            typescript.bundle(base / "route.ts", base, compiler, "__m")
            figures["changed_bundle_ms"] = _ms(start)
        finally:
            compiler.close()
        cold = typescript.TsCompiler()  # a reload: new compiler, nothing changed
        start = time.perf_counter()
        typescript.bundle(base / "route.ts", base, cold, "__m")
        figures["cached_bundle_ms"] = _ms(start)
        figures["compiler_started_on_cache_hit"] = float(cold._mr is not None)
        cold.close()
    figures["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    for name, value in figures.items():
        print(f"{name:32} {value}")
    print("BENCH_JSON " + json.dumps(figures))


if __name__ == "__main__":
    main()

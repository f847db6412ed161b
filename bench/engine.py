"""In-process engine figures: rule selection + extraction + rendering, and a warm JS transform.

Run: `.venv/bin/python bench/engine.py`. Figures are printed, never asserted (targets: under
50 µs per payload for the gmail preset; under 0.5 ms per warm JS transform call). JS transforms
run in sandbox worker processes (a round trip over a pipe per call), so the JS rows also give
the CPU time per call of this process and its workers together, which a busy machine disturbs
less than the wall-clock figures.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# Run as `python bench/engine.py`, this file's folder comes first on sys.path and its name
# would shadow the `engine` package.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

from hookwise.engine.config.convert import structure
from hookwise.engine.config.mapping import MappingConfig
from hookwise.engine.request import InboundRequest
from hookwise.engine.rules.ruleset import RuleSet
from hookwise.engine.transforms import TransformContext, TransformLimits

sys.path.append(str(Path(__file__).resolve().parent))  # after the packages: for mapped.py
from mapped import route_rules

MESSAGE = {
    "id": "18f2c3a4b5d6e7f8",
    "from": "Ann Example <ann@example.com>",
    "subject": "Quarterly numbers",
    "snippet": "Hi, the Q3 numbers are in the attached sheet; revenue is up 12%...",
    "body": "Hi,\n\nthe Q3 numbers are in the attached sheet. Revenue is up 12%.\n\nAnn",
}
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


async def _timed(fn: Callable[[], Awaitable[Any]], n: int) -> list[float]:
    for _ in range(min(200, n)):
        await fn()
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - t)
    return samples


def _row(name: str, samples: list[float], target: str) -> str:
    samples = sorted(samples)
    p50 = samples[len(samples) // 2] * 1e6
    p99 = samples[int(len(samples) * 0.99)] * 1e6
    mean = statistics.fmean(samples) * 1e6
    return f"| {name:<52} | {mean:>9.1f} | {p50:>9.1f} | {p99:>9.1f} | {target:<9} |"


def _tree_cpu() -> float:
    """CPU seconds of this process and its children (the sandbox workers) so far."""
    import os

    ticks = os.sysconf("SC_CLK_TCK")
    pids = [os.getpid()]
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        pids += [int(c) for c in (task / "children").read_text().split()]
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


async def main() -> None:
    rows = []
    gmail = RuleSet.compile([], presets=["gmail"])
    one = InboundRequest(path="gmail", payload={"source": "gmail", "messages": [MESSAGE]}, now=NOW)
    three = InboundRequest(
        path="gmail", payload={"source": "gmail", "messages": [MESSAGE] * 3}, now=NOW
    )

    async def gmail_one() -> Any:
        return await gmail.evaluate(gmail.select(one), one)  # type: ignore[arg-type]

    async def gmail_three() -> Any:
        return await gmail.evaluate(gmail.select(three), three)  # type: ignore[arg-type]

    rows.append(
        _row(
            "gmail preset: select + extract + render, 1 message",
            await _timed(gmail_one, 20_000),
            "< 50 µs",
        )
    )
    rows.append(
        _row("gmail preset: same, 3 messages (3 actions)", await _timed(gmail_three, 10_000), "")
    )

    async def select_only() -> Any:
        return gmail.select(one)

    rows.append(_row("rule selection alone", await _timed(select_only, 20_000), ""))
    gmail.close()

    # Issue 18: 1,000 rules on one path told apart by a header, the request naming the last.
    many = RuleSet.compile([structure(m, MappingConfig) for m in route_rules(1000)])
    last = InboundRequest(
        path="route", payload={"kind": "alert"}, headers={"x-system": "system-999"}, now=NOW
    )

    async def select_indexed() -> Any:
        return many.select(last)

    async def select_every_rule() -> Any:
        return next((r for r in many.rules if r.matches(last)), None)

    rows.append(
        _row(
            "1,000 rules on one path, the last matches: select",
            await _timed(select_indexed, 20_000),
            "",
        )
    )
    rows.append(
        _row(
            "  the same, trying every rule in order (no index)",
            await _timed(select_every_rule, 500),
            "",
        )
    )
    many.close()

    with tempfile.TemporaryDirectory() as folder:
        tdir = Path(folder)
        (tdir / "t.js").write_text(
            "export default function ({ payload, action }) {\n"
            "  const m = payload.messages[0];\n"
            "  return { message: `${action.message} [${m.subject.toUpperCase()}]` };\n"
            "}\n"
        )
        config = structure(
            {
                "id": "js",
                "match": {"path": "gmail"},
                "messageTemplate": "Mail from {{messages[0].from}}",
                "transform": {"module": "t.js"},
            },
            MappingConfig,
        )
        ruleset = RuleSet.compile(
            [config], transforms_dir=tdir, limits=TransformLimits(pool_size=2)
        )
        rule = ruleset.select(one)
        assert rule is not None and rule.transform is not None
        ctx = TransformContext(
            payload=one.payload,
            headers={},
            query={},
            path="gmail",
            extracted={},
            now="",
            action={"kind": "agent", "message": "x"},
        )
        transform = rule.transform

        async def js_call() -> Any:
            return await transform(ctx)

        async def js_rule() -> Any:
            return await ruleset.evaluate(rule, one)

        cpu_before = _tree_cpu()
        samples = await _timed(js_call, 5_000)
        cpu_per_call = (_tree_cpu() - cpu_before) / (len(samples) + min(200, len(samples)))
        rows.append(_row("warm JS transform call (sandbox worker)", samples, "< 500 µs"))
        cpu_row = (
            f"| {'  CPU per warm call, this process + workers':<52} | {cpu_per_call * 1e6:>9.1f} |"
        )
        rows.append(cpu_row + f" {'':>9} | {'':>9} | {'':<9} |")
        rows.append(
            _row("mapped rule with JS transform: evaluate", await _timed(js_rule, 5_000), "")
        )
        ruleset.close()

    print(
        "| figure (in process, µs per operation)                | mean      | p50       | "
        "p99       | target    |"
    )
    print(
        "|------------------------------------------------------|-----------|-----------|-----------|-----------|"
    )
    for row in rows:
        print(row)


if __name__ == "__main__":
    asyncio.run(main())

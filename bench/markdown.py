"""CPU cost of rendering an agent's reply for each channel (markdown-it-py token tree).

    .venv/bin/python bench/markdown.py              # 2,000 renders per dialect
    .venv/bin/python bench/markdown.py --n 500

Renders a typical reply (~0.7 KB: heading, emphasis, links, a list, a fenced block, a quote and
a table) and a long one (~17 KB, split into parts with `render_parts`), and prints CPU
microseconds per render (process CPU time, so other load on the machine disturbs it little) and
the ratio of each dialect to plain text. Last line: `BENCH_JSON {...}`.
"""

from __future__ import annotations

import argparse
import json
import time

from hookwise.server.channels.format import (
    markdown_to_discord,
    markdown_to_mattermost,
    markdown_to_plain,
    markdown_to_slack,
    markdown_to_telegram_html,
    markdown_to_whatsapp,
    render_parts,
    telegram_length,
)

REPLY = """## Deploy report

**Build 4182** passed on *main* in 6m 12s; see [the run](https://ci.example.com/run?id=4182&tab=log)
and [`config.yaml`](https://git.example.com/acme/app/blob/main/config.yaml). Bare link:
https://status.example.com/incidents/(2026)_11.

- api: ***healthy*** (p99 41 ms)
- worker: ~~degraded~~ recovered at 10:42
- db: replica lag `0.3 s` < threshold

```python
def check(service: str) -> bool:
    return probe(service).latency_ms < 250 and "error" not in probe(service).body
```

> Rollback is not needed; the canary kept its error rate under 0.1 %.

| service | p50 | p99 |
|---------|-----|-----|
| api     | 12  | 41  |
| worker  | 30  | 95  |
"""

DIALECTS = {
    "plain": markdown_to_plain,
    "telegram": markdown_to_telegram_html,
    "slack": markdown_to_slack,
    "whatsapp": markdown_to_whatsapp,
    "discord": markdown_to_discord,
    "mattermost": markdown_to_mattermost,
}


def cpu_us(fn, n: int) -> float:
    start = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    n = parser.parse_args().n
    long = "\n\n".join([REPLY] * 25)
    results: dict[str, dict[str, float]] = {}
    for name, render in DIALECTS.items():
        render(REPLY)  # warm
        one = cpu_us(lambda render=render: render(REPLY), n)
        measure = telegram_length if name == "telegram" else len
        split = cpu_us(
            lambda render=render, measure=measure: render_parts(long, 4000, render, measure),
            max(1, n // 50),
        )
        results[name] = {"reply_us": round(one, 1), "long_split_us": round(split, 1)}
    base = results["plain"]["reply_us"]
    print(f"reply {len(REPLY)} chars, long {len(long)} chars; CPU µs per render")
    print(f"{'dialect':<12}{'reply µs':>10}{'x plain':>9}{'long+split µs':>16}")
    for name, r in results.items():
        print(
            f"{name:<12}{r['reply_us']:>10.1f}{r['reply_us'] / base:>9.2f}{r['long_split_us']:>16.1f}"
        )
    print("BENCH_JSON " + json.dumps(results))


if __name__ == "__main__":
    main()

"""TypeScript transforms, through a running gateway and the CLI (issue 30, the spec's "a transform
module (JS/TS)"): a `.ts` module with types, interfaces, enums and an import of a sibling `.ts`
module loads and runs like a `.js` one; `.mts` too; a syntax error fails at load naming the
`.ts` file's line; an import that leaves transformsDir is refused at load; `rules check` and
`rules test` treat them like `.js`."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.mapped import events_of, runs_of

ROUTE_TS = """\
import { label, Severity } from "./lib/util";
import type { Payload } from "./lib/types.ts";

interface Ctx<P> {
  payload: P;
  headers: Record<string, string>;
}

enum Kind {
  Wake = "wake",
  Agent = "agent",
}

type Override = { kind: Kind; text?: string; message?: string; deliver?: boolean } | null;

export default function route(ctx: Ctx<Payload>): Override {
  const severity = ctx.payload.severity as Severity;
  if (severity === Severity.Critical) {
    return { kind: Kind.Agent, message: label(ctx.payload), deliver: false };
  }
  return { kind: Kind.Wake, text: label(ctx.payload) };
}
"""
UTIL_TS = """\
import type { Payload } from "./types.js";

export enum Severity {
  Info = 1,
  Critical = 3,
}

export function label(p: Payload): string {
  const name: string = p.service ?? "unknown";
  return `[${Severity[p.severity] ?? "?"}] ${name}`;
}
"""
TYPES_TS = """\
export interface Payload {
  service?: string;
  severity: number;
}
"""
SHOUT_MTS = """\
class Shouter {
  constructor(private readonly suffix: string) {}
  shout(text: string): string { return text.toUpperCase() + this.suffix; }
}
export function transform({ payload }: { payload: { t: string } }) {
  return { text: new Shouter("!").shout(payload.t) } satisfies { text: string };
}
"""
BROKEN_TS = """\
interface A { x: number }

export default function (ctx: unknown): A {
  return { x: = 1 };
}
"""
ESCAPE_TS = 'import { x } from "../outside";\nexport default () => ({ text: x });\n'

MAPPINGS = [
    {"id": "alerts", "match": {"path": "alerts"}, "action": "wake", "textTemplate": "plain",
     "wakeMode": "next-heartbeat", "transform": {"module": "route.ts"}},
    {"id": "shout", "match": {"path": "shout"}, "action": "wake", "textTemplate": "plain",
     "wakeMode": "next-heartbeat", "transform": {"module": "shout.mts", "export": "transform"}},
]  # fmt: skip


def _write_transforms(config_dir: Path, **more: str) -> Path:
    tdir = config_dir / "hooks" / "transforms"
    (tdir / "lib").mkdir(parents=True, exist_ok=True)
    files = {"route.ts": ROUTE_TS, "lib/util.ts": UTIL_TS, "lib/types.ts": TYPES_TS,
             "shout.mts": SHOUT_MTS, **more}  # fmt: skip
    for name, text in files.items():
        (tdir / name).write_text(text, encoding="utf-8")
    return tdir


def _config(mappings: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "hooks": {"enabled": True, "token": HOOK_TOKEN, "mappings": mappings},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {"defaults": {"heartbeat": {"every": 0}}},
    }


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookwise.server.cli.main", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def gw(
    tmp_path_factory: pytest.TempPathFactory, start_module_gateway: Callable[..., GatewayProcess]
) -> GatewayProcess:
    workdir = tmp_path_factory.mktemp("typescript") / "gw"
    _write_transforms(workdir)
    return start_module_gateway(_config(MAPPINGS), workdir=workdir)


def test_a_ts_transform_with_types_enums_and_a_sibling_import_runs(gw: GatewayProcess) -> None:
    r = gw.hook("alerts", {"service": "db", "severity": 1})
    assert r.status_code == 200, r.text
    assert [e["text"] for e in events_of(gw, "alerts")] == ["[Info] db"]
    r = gw.hook("alerts", {"service": "api", "severity": 3})  # the enum picks the other kind
    assert r.status_code == 202, r.text
    assert [run["message"] for run in runs_of(gw, "alerts")] == ["[Critical] api"]


def test_an_mts_module_with_a_named_export_runs(gw: GatewayProcess) -> None:
    r = gw.hook("shout", {"t": "hey"})
    assert r.status_code == 200, r.text
    assert [e["text"] for e in events_of(gw, "shout")] == ["HEY!"]


@pytest.mark.parametrize(
    ("module", "expected"),
    [
        ("broken.ts", "broken.ts:4:15: Expression expected"),
        ("escape.ts", "import '../outside' leaves transformsDir"),
        # 5 MiB grew the gateway by ~470 MiB while it compiled: refused before compiling
        ("huge.ts", "huge.ts: 5242880 bytes, over the 512 KiB limit of a TypeScript module"),
    ],
)
def test_a_bad_ts_module_fails_at_load_naming_its_line(
    tmp_path: Path, module: str, expected: str
) -> None:
    huge = "export default function f(ctx: any) { return null; }\n"
    huge += "/" * (5 * 1024 * 1024 - len(huge) - 1) + "\n"
    _write_transforms(tmp_path, **{"broken.ts": BROKEN_TS, "escape.ts": ESCAPE_TS,
                                   "huge.ts": huge})  # fmt: skip
    (tmp_path / "hooks" / "outside.ts").write_text("export const x = 1;\n", encoding="utf-8")
    mapping = {"id": "bad", "match": {"path": "bad"}, "messageTemplate": "m",
               "transform": {"module": module}}  # fmt: skip
    config = tmp_path / "hookwise.yaml"
    config.write_text(yaml.safe_dump(_config([mapping])), encoding="utf-8")
    for command in (("config", "check"), ("rules", "check")):
        r = _cli(*command, "-c", str(config))
        assert r.returncode == 1, r.stdout + r.stderr
        assert "transform.module" in r.stderr + r.stdout
        assert expected in r.stderr + r.stdout
    gateway = GatewayProcess(_config([mapping]), tmp_path)
    with pytest.raises(RuntimeError, match="hookwise did not start"):
        gateway.start()
    assert expected in gateway.stderr()


def test_rules_check_and_rules_test_treat_ts_like_js(tmp_path: Path) -> None:
    _write_transforms(tmp_path)
    config = tmp_path / "hookwise.yaml"
    config.write_text(yaml.safe_dump(_config(MAPPINGS)), encoding="utf-8")
    r = _cli("rules", "check", "-c", str(config))
    assert r.returncode == 0, r.stdout + r.stderr
    payload = tmp_path / "alert.json"
    payload.write_text(json.dumps({"service": "api", "severity": 3}), encoding="utf-8")
    r = _cli("rules", "test", "-c", str(config), "--path", "alerts", "--payload", str(payload))
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    [action] = out["actions"]
    assert action["validated"]["message"] == "[Critical] api"

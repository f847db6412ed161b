"""The manual's YAML is tested like its shell: every ```yaml block of the README and docs/ parses
(as hookwise reads YAML: ruamel, 1.2), and where it is a whole configuration (top-level keys of
the config) or mappings (a rule or a list of rules) it loads as `config check` loads it: the
config validated, its rules compiled. So are the inline YAML of the signature table and of the
one-liners that give a `verify` block. `${NAME}` references get a value, as the reader's
environment would give them. A block that is only a piece of a larger file says so with
`<!-- fragment -->` on the line before it."""

from __future__ import annotations

import base64
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from hookwise.engine.config.load import load_data
from hookwise.engine.errors import ConfigError
from hookwise.engine.yamlfile import load_yaml
from hookwise.server.lifecycle.gateway import compile_rules

REPO = Path(__file__).resolve().parents[2]
PAGES = [
    "README.md",
    *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").rglob("*.md")),
]
BLOCK = re.compile(r"(<!-- fragment -->\n)?```ya?ml\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"`((?:verify: )?\{scheme: [^`]*\})`")
ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
CONFIG_KEYS = {
    "hooks",
    "gateway",
    "agents",
    "models",
    "channels",
    "store",
    "tools",
    "session",
    "telemetry",
}
RULE_KEYS = {"id", "match", "action", "messageTemplate", "textTemplate", "transform", "verify"}
TOKENS = {"token": "docs-hook-token-0123456789abcdef"}
ADMIN = {"auth": {"token": "docs-admin-token-0123456789abcdef"}}


def _blocks() -> list[tuple[str, int, str, bool]]:
    out = []
    for page in PAGES:
        text = (REPO / page).read_text(encoding="utf-8")
        for m in BLOCK.finditer(text):
            line = text.count("\n", 0, m.start(2)) + 1
            out.append((page, line, m.group(2), bool(m.group(1))))
    return out


def _inline() -> list[tuple[str, int, str]]:
    out = []
    for page in PAGES:
        for n, line in enumerate((REPO / page).read_text(encoding="utf-8").splitlines(), 1):
            out.extend((page, n, m.group(1)) for m in INLINE.finditer(line))
    return out


def _env(text: str) -> dict[str, str]:
    """A value for every `${NAME}` the text references (a key where one is expected)."""
    values = {
        "DISCORD_PUBLIC_KEY": "ab" * 32,
        "SENDGRID_VERIFICATION_KEY": _P256,
        "ADYEN_HMAC_KEY": "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056",
        "SVIX_WEBHOOK_SECRET": "whsec_"
        + base64.b64encode(b"docs-standard-webhooks-key-0123").decode(),
        "SVIX_PUBLIC_KEY": "whpk_" + base64.b64encode(bytes(range(32))).decode(),
        # Standard Webhooks secrets of callbacks and lifecycle subscribers (docs/answers-back.md)
        "CALLBACK_SECRET": "whsec_" + base64.b64encode(b"docs-callback-secret-0123").decode(),
        "EVENTS_SECRET": "whsec_" + base64.b64encode(b"docs-events-secret-01234").decode(),
    }
    return {
        name: values.get(name, f"docs-{name.lower()}-0123456789") for name in ENV_REF.findall(text)
    }


# an ECDSA P-256 public key (base64 SubjectPublicKeyInfo), as SendGrid shows one
_P256 = (
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEVs/o5+uQbTjL3chynL4wXgUg2R9q9UU8I5mEovUf86QZ7kOBIjJ"
    "wqnzD1omageEHWwHdBO6B+dFabmdT9POxg=="
)


def _with_defaults(config: dict[str, Any]) -> dict[str, Any]:
    """What a reader adds to a partial config shown in the manual: the tokens of the quick start."""
    hooks = config.get("hooks")
    if isinstance(hooks, dict) and "token" not in hooks and "tokenFile" not in hooks:
        config["hooks"] = {**hooks, "enabled": hooks.get("enabled", True), **TOKENS}
    config.setdefault("gateway", ADMIN)
    return config


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A config's folder with the project's transforms where a config finds them."""
    root = tmp_path_factory.mktemp("docs-config")
    shutil.copytree(REPO / "transforms", root / "hooks" / "transforms")
    return root


def _stub_transforms(config: dict[str, Any], folder: Path) -> None:
    """A module a rule names that the reader writes (`review.js`): a stub that skips."""
    hooks = config.get("hooks")
    for rule in hooks.get("mappings") or () if isinstance(hooks, dict) else ():
        module = (rule.get("transform") or {}).get("module") if isinstance(rule, dict) else None
        target = folder / "hooks" / "transforms" / str(module)
        if module and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("export default function transform() { return null; }\n")


def _load(config: dict[str, Any], text: str, where: str, folder: Path) -> None:
    _stub_transforms(config, folder)
    try:
        loaded = load_data(config, source=folder / "hookwise.yaml", env=_env(text))
        if loaded.config.hooks.enabled:
            compile_rules(loaded).close()
    except ConfigError as e:
        problems = "; ".join(f"{i.path}: {i.message}" for i in e.issues)
        pytest.fail(f"{where}: does not load: {problems}")


@pytest.mark.parametrize(("page", "line", "text", "fragment"), _blocks(), ids=lambda v: str(v)[:40])
def test_every_yaml_block_parses_and_loads(
    page: str, line: int, text: str, fragment: bool, folder: Path
) -> None:
    where = f"{page}:{line}"
    data = load_yaml(text, where)  # a syntax error names the line and column
    if fragment or data is None:
        return
    rules: list[Any] | None = None
    if isinstance(data, list) and all(isinstance(r, dict) and RULE_KEYS & r.keys() for r in data):
        rules = data
    elif isinstance(data, dict) and "match" in data:
        rules = [data]
    if rules is not None:
        _load(_with_defaults({"hooks": {"mappings": rules}}), text, where, folder)
    elif isinstance(data, dict) and data.keys() <= CONFIG_KEYS:
        _load(_with_defaults(data), text, where, folder)


@pytest.mark.parametrize(("page", "line", "text"), _inline(), ids=lambda v: str(v)[:40])
def test_every_inline_verify_block_is_yaml_that_loads(
    page: str, line: int, text: str, folder: Path
) -> None:
    where = f"{page}:{line}"
    block = load_yaml(text, where)
    assert isinstance(block, dict), f"{where}: not a mapping: {text}"
    block = block.get("verify", block)
    scheme = block["scheme"]
    config = {"hooks": {"verify": {"docs": block}}}
    _load(_with_defaults(config), text, where, folder)
    # the table shows what to paste: a provider that cannot send the hook token authenticates
    # by its signature (`hmac` is a sender of your own, which can send the token)
    if (
        page == "docs/signatures.md"
        and text.startswith("{")
        and scheme not in ("hmac", "hmac-sha256")
    ):
        assert block.get("auth") == "signature", f"{where}: {scheme} lacks auth: signature"


def test_the_blocks_are_found() -> None:
    assert len(_blocks()) > 20 and len(_inline()) > 20

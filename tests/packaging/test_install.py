"""`pip install .` installs only the `hookwise` namespace (and the plugin its own package), with
the data files inside: the wheels are built from the repository and installed into a scratch
directory, then imported by a Python that sees that directory and the dependencies, but not the
editable install of the working tree."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _wheel(source: Path, dist: str, out: Path) -> Path:
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if r.returncode != 0:
        pytest.fail(f"pip wheel {source} failed:\n{r.stderr[-3000:]}")
    [wheel] = out.glob(f"{dist}-*.whl")
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Path]]:
    """(the hookwise wheel, the plugin's wheel, a directory both are installed into)."""
    out = tmp_path_factory.mktemp("wheels")
    main = _wheel(REPO, "hookwise", out)
    plugin = _wheel(REPO / "plugins" / "hookwise-mattermost", "hookwise_mattermost", out)
    target = tmp_path_factory.mktemp("site")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            str(main),
            str(plugin),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    yield main, plugin, target


def _python(target: Path, code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` with only `target` and the dependencies' site-packages on the path (-S: no
    .pth files, so the working tree's editable install is not seen)."""
    deps = sysconfig.get_paths()["purelib"]
    boot = f"import sys; sys.path[:0] = [{str(target)!r}, {deps!r}]\n"
    return subprocess.run(
        [sys.executable, "-S", "-c", boot + code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )


def test_the_wheels_hold_only_their_namespaces(installed: tuple[Path, Path, Path]) -> None:
    main, plugin, _ = installed
    tops = {n.split("/", 1)[0] for n in zipfile.ZipFile(main).namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"hookwise"}
    tops = {n.split("/", 1)[0] for n in zipfile.ZipFile(plugin).namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"hookwise_mattermost"}
    names = set(zipfile.ZipFile(main).namelist())
    for data in (
        "hookwise/py.typed",
        "hookwise/rules/presets/gmail.yaml",
        "hookwise/schemas/config.schema.json",
        "hookwise/server/store/sqlite/migrations/0001_initial.sql",
        "hookwise/server/store/postgres/migrations/0001_initial.sql",
    ):
        assert data in names


def test_installed_only_hookwise_is_importable_and_it_works(
    installed: tuple[Path, Path, Path],
) -> None:
    _, _, target = installed
    r = _python(
        target,
        """
import importlib.util, sqlite3, sys
from importlib.metadata import version
import hookwise, hookwise.channels, hookwise.plumbing.children, hookwise.server.cli.main, hookwise_mattermost
from hookwise.engine.rules.ruleset import RuleSet
from hookwise.server.store.sqlite.migrate import migrate
assert hookwise.__file__.startswith(sys.path[0]), hookwise.__file__
for name in ("plumbing", "engine", "server", "rules", "schemas", "transforms"):
    assert importlib.util.find_spec(name) is None, name
RuleSet.compile([], presets=["gmail"]).close()
assert migrate(sqlite3.connect(":memory:")) >= 4
print(hookwise.__version__ == version("hookwise"))
""",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True"

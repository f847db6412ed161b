"""The manual is one site a reader can walk: every page under docs/ is in mkdocs.yml's nav and is
reached by links from the README (directly, or through pages it links to), every relative link
between them names a file that exists, and `mkdocs build --strict` passes (no broken link, anchor
or nav entry; skipped when mkdocs is not installed: `./scripts/setup` installs the docs extra)."""

from __future__ import annotations

import importlib.util
import os
import posixpath
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)")
ANCHORED = re.compile(r"\]\(([^)\s#]*)#([^)\s]+)\)")
HEADING = re.compile(r"^#+ (.+)$", re.M)
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _pages() -> set[str]:
    return {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}


def _nav_entries(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [e for item in node for e in _nav_entries(item)]
    if isinstance(node, dict):
        return [e for value in node.values() for e in _nav_entries(value)]
    return []


def _links(path: Path) -> list[str]:
    """The relative links of a Markdown file's prose (code blocks left out), as repo paths."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    base = path.parent.relative_to(REPO).as_posix()
    out = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        out.append(posixpath.normpath(posixpath.join(base, target)))
    return out


def test_every_page_is_in_the_nav_and_the_nav_names_only_pages() -> None:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = _nav_entries(config["nav"])
    assert len(nav) == len(set(nav)), "a page is in the nav twice"
    assert set(nav) == _pages()


def test_every_page_is_reached_from_the_readme() -> None:
    seen: set[str] = set()
    todo = ["README.md"]
    while todo:
        current = todo.pop()
        for target in _links(REPO / current):
            if target.endswith(".md") and target.startswith("docs/") and target not in seen:
                seen.add(target)
                todo.append(target)
    assert {f"docs/{p}" for p in _pages()} <= seen


@pytest.mark.parametrize("path", ["README.md", *sorted(f"docs/{p}" for p in _pages())])
def test_every_relative_link_names_a_file_of_the_repository(path: str) -> None:
    missing = [t for t in _links(REPO / path) if not (REPO / t).exists()]
    assert not missing, f"{path} links to files that do not exist: {missing}"


def _github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading (MkDocs' toc gives the same for the headings used here)."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


@pytest.mark.parametrize("path", ["README.md", *sorted(f"docs/{p}" for p in _pages())])
def test_every_anchor_names_a_heading_of_its_page(path: str) -> None:
    """What the strict build checks for the pages, for the README too, with GitHub's anchors."""
    source = REPO / path
    text = FENCE.sub("", source.read_text(encoding="utf-8"))
    broken = []
    for target, anchor in ANCHORED.findall(text):
        page = (source.parent / target).resolve() if target else source
        if page.suffix != ".md" or not page.exists():
            continue
        headings = HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8")))
        if anchor not in {_github_slug(h) for h in headings}:
            broken.append(f"{target}#{anchor}")
    assert not broken, f"{path} links to anchors no heading has: {broken}"


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
    reason="mkdocs and mkdocs-material are not installed (the `docs` extra; ./scripts/setup)",
)
def test_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "site" / "performance" / "index.html").exists()

"""MkDocs hooks for the manual (mkdocs.yml `hooks:`): links from a page to a file of the repository
outside docs/ (`../schemas/config.schema.json`, `../README.md#try-it`), which work as written on
GitHub, become links to that file under `repo_url` on the built site. A link to a file that does
not exist is a warning, so `mkdocs build --strict` fails on it as on any broken link."""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.plugins.hookwise")
_LINK = re.compile(r"(\]\()(\.\./[^)\s#]+)(#[^)\s]*)?(\))")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    docs = Path(config["docs_dir"]).resolve()
    repo = docs.parent
    page_dir = posixpath.dirname(page.file.src_uri)
    base = config["repo_url"].rstrip("/")

    def rewrite(m: re.Match[str]) -> str:
        rel = posixpath.normpath(posixpath.join(page_dir, m.group(2)))
        target = (docs / rel).resolve()
        if target.is_relative_to(docs):
            return m.group(0)
        if not target.is_relative_to(repo) or not target.exists():
            log.warning(
                "%s links to %s, which is not a file of the repository",
                page.file.src_uri,
                m.group(2),
            )
            return m.group(0)
        kind = "tree" if target.is_dir() else "blob"
        path = target.relative_to(repo).as_posix()
        return f"{m.group(1)}{base}/{kind}/main/{path}{m.group(3) or ''}{m.group(4)}"

    # leave fenced code alone: only prose links are rewritten
    out, last = [], 0
    for fence in _FENCE.finditer(markdown):
        out.append(_LINK.sub(rewrite, markdown[last : fence.start()]))
        out.append(fence.group(0))
        last = fence.end()
    out.append(_LINK.sub(rewrite, markdown[last:]))
    return "".join(out)

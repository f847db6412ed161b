"""Browser fixtures: Debian's Chromium driven by Playwright for Python, against a real gateway.

Playwright's own browser download does not work on this machine class, so the browser is the
system's `chromium` (`.ci/run` installs it). When `HOOKWISE_SCREENSHOTS` names a folder, the tests
save their screenshots there (the manual's pictures in `docs/console/` come from such a run).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = _chromium()
    if executable is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


@pytest.fixture
def shoot(tmp_path: Path) -> Callable[[Any, str], Path]:
    """`shoot(page, name)` saves a full-page screenshot (to `HOOKWISE_SCREENSHOTS` when set)."""
    folder = Path(os.environ.get("HOOKWISE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)

    def take(page: Any, name: str) -> Path:
        path = folder / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take

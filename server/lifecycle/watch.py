"""`hookwise serve --watch`: reload the rules when the files they come from change.

The files a reload reads are the config file, every file the config's `hooks.rules` entries name
(globs are expanded again after each change, so new files are seen) and every file under the
transforms directory. `watchfiles` (the file-system notifications of the OS: inotify, FSEvents,
...) wakes the task when something changes in the folders that hold them; a change to one of
those files (added, removed, changed, or replaced by an atomic rename) calls
`gateway.reload_audited("watch")`, which compiles on a thread, keeps the old rules when the new
ones do not compile, logs why, and records the reload in the audit log. Other files in those folders (a SQLite store beside the config, an
editor's swap file) wake nothing. On a file system without notifications (some network and
container mounts), set `WATCHFILES_FORCE_POLLING=1`.
"""

from __future__ import annotations

import contextlib
import fnmatch
import glob
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from watchfiles import Change, awatch

from ...engine.config.load import load_config
from ...engine.config.models import LoadedConfig
from ...engine.errors import ConfigError
from ...engine.transforms._paths import transforms_dir_of

log = logging.getLogger("hookwise.watch")

#: how long a burst of changes (an editor's save, a `git checkout`) is gathered into one reload
DEBOUNCE_MS = 400


class Reloadable(Protocol):
    loaded: LoadedConfig

    async def reload_audited(self, via: str) -> bool: ...


def watched_paths(loaded: LoadedConfig) -> list[Path]:
    """The files a reload reads: the config file, the rule files, the transforms."""
    base = loaded.base_dir
    paths: list[Path] = []
    if loaded.source is not None:
        paths.append(Path(loaded.source))
    hooks = loaded.config.hooks
    for pattern in hooks.rules:
        full = Path(pattern).expanduser()
        if not full.is_absolute():
            full = base / full
        if glob.has_magic(pattern):
            paths.extend(Path(p) for p in sorted(glob.glob(str(full), recursive=True)))
        else:
            paths.append(full)
    for root, dirs, files in os.walk(_transforms_dir(loaded), followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
        paths.extend(Path(root) / f for f in sorted(files) if not f.startswith("."))
    return paths


def _transforms_dir(loaded: LoadedConfig) -> Path:
    """Where the transforms live (`<config dir>/hooks/transforms`, or `transformsDir` under it)."""
    try:
        return transforms_dir_of(loaded.base_dir, loaded.config.hooks.transforms_dir)
    except ConfigError:  # the reload reports the error itself
        return loaded.base_dir / "hooks" / "transforms"


def _patterns(loaded: LoadedConfig) -> list[str]:
    """The config file, the rule files' patterns and the transforms, as absolute patterns."""
    out = [Path(loaded.source)] if loaded.source is not None else []
    for pattern in loaded.config.hooks.rules:
        full = Path(pattern).expanduser()
        out.append(full if full.is_absolute() else loaded.base_dir / full)
    out.append(_transforms_dir(loaded) / "*")
    return [str(p.resolve()) for p in out]


def watched_roots(loaded: LoadedConfig) -> list[Path]:
    """The existing folders that hold (or may come to hold) the watched files."""
    roots: set[Path] = set()
    for pattern in _patterns(loaded):
        parts = Path(pattern).parts
        magic = next((i for i, part in enumerate(parts) if glob.has_magic(part)), None)
        folder = Path(*parts[:magic]) if magic is not None else Path(pattern).parent
        while not folder.is_dir() and folder != folder.parent:
            folder = folder.parent
        roots.add(folder.resolve())
    # a folder inside another is watched through it (watchfiles watches recursively)
    return sorted(r for r in roots if not any(o != r and o in r.parents for o in roots))


def _relevant(patterns: list[str]) -> Callable[[Change, str], bool]:
    """watchfiles' filter: a path a reload could read (`*` may cross folders: a prefilter), or a
    folder on the way to one: a file made in a new folder before the watch on that folder is in
    place raises no event of its own, so the new folder reloads (the reload reads what is there)."""

    def wanted(_: Change, path: str) -> bool:
        name = os.path.basename(path)
        if name.startswith(".") or "__pycache__" in path:
            return False
        return any(
            path == p or fnmatch.fnmatchcase(path, p) or p.startswith(path + os.sep)
            for p in patterns
        )

    return wanted


async def watch(gateway: Reloadable, *, debounce_ms: int = DEBOUNCE_MS) -> None:
    """Watch until cancelled; call `gateway.reload_audited("watch")` after each change."""
    loaded = gateway.loaded
    log.info("watching %d file(s) for changes", len(watched_paths(loaded)))
    while True:
        roots, patterns = watched_roots(loaded), _patterns(loaded)
        async for changes in awatch(*roots, watch_filter=_relevant(patterns), debounce=debounce_ms):
            names = sorted({Path(path).name for _, path in changes})
            log.info("watch: %s changed; reloading", ", ".join(names))
            if loaded.source is not None:
                # When the config does not load, keep watching the files of the last one that did.
                with contextlib.suppress(ConfigError):
                    loaded = load_config(loaded.source)
            try:
                await gateway.reload_audited("watch")
            except Exception:
                log.exception("watch: reload raised; the current rules stay")
            if (watched_roots(loaded), _patterns(loaded)) != (roots, patterns):
                break  # the config names other files now: watch those

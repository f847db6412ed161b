"""`hookwise serve --watch`: reload the rules when the files they come from change.

An asyncio task polls, every second, the stat of the config file, of every file the config's
`hooks.rules` entries name (globs are expanded on each poll, so new files are seen) and of every
file under the transforms directory. When anything was added, removed or changed it calls
`gateway.reload_async()` (which compiles on a thread, keeps the old rules when the new ones do
not compile, and logs why).
Polling needs no extra dependency and works on every file system; a second of latency is fine
for configuration.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import logging
import os
from pathlib import Path
from typing import Protocol

from ...engine.config import load_config
from ...engine.config_models import LoadedConfig
from ...engine.errors import ConfigError
from ...engine.transforms._paths import transforms_dir_of

log = logging.getLogger("hookwise.watch")

POLL_INTERVAL = 1.0

Snapshot = dict[str, tuple[int, int, int]]


class Reloadable(Protocol):
    loaded: LoadedConfig

    async def reload_async(self) -> bool: ...


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
    try:
        tdir = transforms_dir_of(base, hooks.transforms_dir)
    except ConfigError:
        tdir = base / "hooks" / "transforms"  # the reload reports the error itself
    for root, dirs, files in os.walk(tdir, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
        paths.extend(Path(root) / f for f in sorted(files) if not f.startswith("."))
    return paths


def snapshot(paths: list[Path]) -> Snapshot:
    """mtime, size and inode of each existing file (an atomic rename changes the inode)."""
    out: Snapshot = {}
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            continue
        out[str(path)] = (st.st_mtime_ns, st.st_size, st.st_ino)
    return out


async def watch(gateway: Reloadable, *, interval: float = POLL_INTERVAL) -> None:
    """Poll forever; call `gateway.reload_async()` after each change. Cancel the task to stop."""
    loaded = gateway.loaded
    paths = watched_paths(loaded)
    seen = snapshot(paths)
    log.info("watching %d file(s) for changes", len(seen))
    while True:
        await asyncio.sleep(interval)
        paths = watched_paths(loaded)
        current = snapshot(paths)
        if current == seen:
            continue
        changed = sorted(set(current.items()) ^ set(seen.items()))
        names = sorted({Path(p).name for p, _ in changed})
        log.info("watch: %s changed; reloading", ", ".join(names))
        if loaded.source is not None:
            # When the config does not load, keep watching the files of the last one that did.
            with contextlib.suppress(ConfigError):
                loaded = load_config(loaded.source)
        # Taken before reloading: a change made while the reload reads the files is seen next time.
        seen = snapshot(watched_paths(loaded))
        try:
            await gateway.reload_async()
        except Exception:
            log.exception("watch: reload raised; the current rules stay")

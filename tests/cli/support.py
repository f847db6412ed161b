"""Running the `hookwise` command as a user does: the installed console script, in a directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HOOKWISE = str(Path(sys.executable).with_name("hookwise"))


def run(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`hookwise ARGS...` in `cwd`; HOOKWISE_CONFIG is unset unless `env` sets it."""
    base = {k: v for k, v in os.environ.items() if k != "HOOKWISE_CONFIG"}
    return subprocess.run(
        [HOOKWISE, *args],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )

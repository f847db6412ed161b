"""hookwise: a webhook gateway for AI agents.

The installed namespace. The repository keeps its top-level folders (`plumbing/`, `engine/`,
`server/`, `rules/`, `schemas/`, `transforms/`); installed, they live here as `hookwise.engine`,
`hookwise.server`, ... (see `setup.py`). Channel plugins import `hookwise.channels`.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("hookwise")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]

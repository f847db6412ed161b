"""`ServeOptions`: the `serve` command line as one typed value, built once from the arguments
and handed whole to every gateway worker.

The supervisor of `--workers N` passes its options to each worker serialized in the
environment (`OPTIONS_ENV`, JSON), with only the inherited socket's descriptor added; it never
rebuilds a worker's command line. A field added here (and to the `serve` parser under the same
name) therefore reaches the workers by itself: `from_namespace` takes every field from the parsed
arguments, and a test keeps the parser's options and the fields in step.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import MutableMapping
from typing import Any

import attrs

from ..logs import Format

OPTIONS_ENV = "HOOKWISE_SERVE_OPTIONS"
"""The environment variable that carries a worker's `ServeOptions` (JSON)."""


@attrs.frozen
class ServeOptions:
    """Everything `hookwise serve` was asked for on its command line."""

    config: str
    host: str = "127.0.0.1"
    port: int = 8787
    state_dir: str = ".hookwise"
    log_level: str = "info"
    log_format: Format | None = None  # None: `logging.format` from the config, else text
    watch: bool = False
    store: str | None = None
    workers: int = 1
    debug: bool = False
    socket_fd: int | None = None  # a worker's: the listening socket it inherited

    @property
    def is_worker(self) -> bool:
        """A worker of a supervisor (it serves on the socket it inherited)."""
        return self.socket_fd is not None

    @classmethod
    def from_namespace(cls, args: argparse.Namespace) -> ServeOptions:
        """The options from `serve`'s parsed arguments: every field, by its name."""
        given = vars(args)
        return cls(**{f.name: given[f.name] for f in attrs.fields(cls) if f.name in given})

    def for_worker(self, socket_fd: int) -> ServeOptions:
        """These options as a worker serving on the inherited socket `socket_fd` gets them."""
        return attrs.evolve(self, socket_fd=socket_fd)

    def to_json(self) -> str:
        return json.dumps(attrs.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ServeOptions:
        """The options `to_json` wrote; `ValueError` for anything else (an unknown key, a
        missing one, not JSON)."""
        try:
            data: Any = json.loads(text)
        except ValueError as e:
            raise ValueError(f"serve options: not JSON ({e})") from None
        if not isinstance(data, dict):
            raise ValueError("serve options: not a JSON object")
        names = {f.name for f in attrs.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"serve options: unknown {', '.join(unknown)}")
        try:
            return cls(**data)
        except TypeError as e:
            raise ValueError(f"serve options: {e}") from None

    def worker_env(self, socket_fd: int) -> dict[str, str]:
        """The environment of a worker serving on `socket_fd`: this process's, plus the
        options."""
        env = dict(os.environ)
        env[OPTIONS_ENV] = self.for_worker(socket_fd).to_json()
        return env

    @classmethod
    def take_from_env(cls, environ: MutableMapping[str, str] = os.environ) -> ServeOptions:
        """A worker's options, removed from its environment (its own children do not see
        them)."""
        text = environ.pop(OPTIONS_ENV, None)
        if text is None:
            raise ValueError(f"serve options: ${OPTIONS_ENV} is not set (not started as a worker)")
        return cls.from_json(text)


__all__ = ["OPTIONS_ENV", "ServeOptions"]

"""Where a transform module may live: inside `hooks.transformsDir`, and nowhere else."""

from __future__ import annotations

from pathlib import Path, PurePosixPath, PureWindowsPath

from . import TransformLoadError


def resolve_module(transforms_dir: Path, module: str) -> Path:
    """The real path of `module` inside `transforms_dir`.

    Refused: an empty name, an absolute path, any `..` segment, a path whose real location
    (symlinks resolved) is outside the directory, and a file that does not exist.
    """
    text = module.strip()
    if not text:
        raise TransformLoadError("transform.module is empty")
    if (
        PurePosixPath(text).is_absolute()
        or PureWindowsPath(text).is_absolute()
        or text[:1] in "/\\"
    ):
        raise TransformLoadError(f"transform.module must be relative to transformsDir: {module!r}")
    parts = text.replace("\\", "/").split("/")
    if ".." in parts:
        raise TransformLoadError(f"transform.module may not contain '..': {module!r}")
    base = transforms_dir.resolve()
    if not base.is_dir():
        raise TransformLoadError(f"hooks.transformsDir is not a directory: {str(transforms_dir)!r}")
    target = (base / text).resolve()
    if not target.is_relative_to(base):
        raise TransformLoadError(
            f"transform.module resolves outside transformsDir (symlink?): {module!r}"
        )
    if not target.is_file():
        raise TransformLoadError(f"transform module not found in transformsDir: {module!r}")
    return target

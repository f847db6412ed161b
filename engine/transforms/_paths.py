"""Where transforms live: `hooks.transformsDir` inside `<config dir>/hooks/transforms`, and a
module inside `hooks.transformsDir`, and nowhere else."""

from __future__ import annotations

from pathlib import Path, PurePosixPath, PureWindowsPath

from ..errors import ConfigError, ConfigIssue
from .base import TransformLoadError

#: a rule copied from the examples names a module that is not copied with it
_EXAMPLES = " (the worked examples' modules are in the project's transforms/ folder)"


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
        raise TransformLoadError(
            f"hooks.transformsDir is not a directory: {str(transforms_dir)!r}; create it and "
            f"copy {module!r} there{_EXAMPLES}"
        )
    target = (base / text).resolve()
    if not target.is_relative_to(base):
        raise TransformLoadError(
            f"transform.module resolves outside transformsDir (symlink?): {module!r}"
        )
    if not target.is_file():
        raise TransformLoadError(
            f"transform module not found in transformsDir: {module!r} (looked in {str(base)!r}); "
            f"copy it there{_EXAMPLES}"
        )
    return target


def transforms_dir_of(base_dir: Path, configured: str | None) -> Path:
    """Where `hooks.transformsDir` puts transforms, confined as the peer confines it.

    The root is `<config dir>/hooks/transforms` (also the default). A relative `transformsDir`
    is taken under that root (`mine` is `<config dir>/hooks/transforms/mine`); an absolute one
    must lie inside it. A path whose real location (`..` and symlinks resolved, the root's own
    real path as the reference) leaves the root is a `ConfigError` naming `hooks.transformsDir`.
    """
    root = base_dir / "hooks" / "transforms"
    text = (configured or "").strip()
    if not text:
        return root
    given = Path(text)
    target = given if given.is_absolute() else root / given
    if not target.resolve().is_relative_to(root.resolve()):
        raise ConfigError(
            [
                ConfigIssue(
                    "hooks.transformsDir",
                    f"{text!r} is outside {str(root)!r}: transforms live in <config dir>/hooks/"
                    "transforms; a relative transformsDir is taken under it, and neither '..',"
                    " an absolute path nor a symlink may leave it",
                )
            ]
        )
    return target

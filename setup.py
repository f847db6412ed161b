"""Installs the repository's top-level folders under the one `hookwise` namespace.

`engine/` becomes `hookwise.engine`, `server/` `hookwise.server`, `plumbing/` `hookwise.plumbing`; the data folders (`rules/`,
`schemas/`, `transforms/`) ship beside them as `hookwise/rules`, ... Nothing named `engine` or
`server` lands in site-packages. Everything else about the distribution is in `pyproject.toml`.
"""

from pathlib import Path

from setuptools import setup

ROOTS = {
    "hookwise": "hookwise",
    "hookwise.engine": "engine",
    "hookwise.server": "server",
    "hookwise.plumbing": "plumbing",
    "hookwise.rules": "rules",
    "hookwise.schemas": "schemas",
    "hookwise.transforms": "transforms",
}
DATA_FILES = [
    "py.typed",
    "*.sql",
    "*.yaml",
    "*.yml",
    "*.json",
    "*.js",
    "*.mjs",
    "*.cjs",
    "*.html",
    "*.css",
    "*.txt",
]


def _packages() -> list[str]:
    """Every folder under the roots (code packages, and data folders such as migrations/)."""
    found = []
    for name, folder in ROOTS.items():
        for sub in sorted(p for p in [Path(folder), *Path(folder).rglob("*")] if p.is_dir()):
            if "__pycache__" not in sub.parts:
                found.append(".".join((name, *sub.relative_to(folder).parts)))
    return found


setup(packages=_packages(), package_dir=ROOTS, package_data={"": DATA_FILES})

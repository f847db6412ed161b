"""What both stores' migrations share: the refusal of a database newer than the code.

A database migrated by a newer hookwise has tables and columns this code does not know; writing
to it could corrupt what the newer version relies on. So opening it fails, before anything is
written, with a message that says what happened and what to do.
"""

from __future__ import annotations

from ..version import VERSION


class SchemaTooNew(Exception):
    """The database's schema version is newer than the newest migration this code has."""

    def __init__(self, where: str, found: int, known: int) -> None:
        self.where, self.found, self.known = where, found, known
        super().__init__(
            f"{where} has schema version {found}, newer than this hookwise ({VERSION}) knows "
            f"(up to {known}): a newer hookwise has used it. Run that version (or newer), or "
            "point this one at another database; nothing was changed"
        )

    def __reduce__(self) -> tuple[type[SchemaTooNew], tuple[str, int, int]]:
        # raised in SQLite's writer process, and raised again in the gateway
        return (SchemaTooNew, (self.where, self.found, self.known))


def refuse_newer(where: str, found: int, migrations: list[tuple[int, str]]) -> None:
    """Raise `SchemaTooNew` when `found` is past the last of `migrations` (number, sql)."""
    known = max((n for n, _ in migrations), default=0)
    if found > known:
        raise SchemaTooNew(where, found, known)

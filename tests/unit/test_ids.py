"""Identifiers are valid, distinct UUIDv4 strings."""

from __future__ import annotations

import uuid

from hookwise.server.ids import new_id


def test_ids_are_version_4_uuids_and_distinct() -> None:
    ids = [new_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for value in ids[:600]:
        parsed = uuid.UUID(value)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122 and str(parsed) == value

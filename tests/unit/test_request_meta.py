"""`RequestMeta`, what the request log records of a hook request, is immutable: the walk that
learns the provider's names makes a new value, and an earlier value is untouched (a refusal
recorded with it says what was known then)."""

from __future__ import annotations

import attrs
import pytest

from hookwise.server.ingress.dispatch import RequestMeta


class _Names:
    """A verifier's scheme as `named_by` asks it: the event type and the delivery id."""

    def __init__(self, event_type: str | None, delivery_id: str | None) -> None:
        self._event_type, self._delivery_id = event_type, delivery_id

    def event_type(self, request: object) -> str | None:
        return self._event_type

    def delivery_id(self, request: object) -> str | None:
        return self._delivery_id


def test_a_meta_cannot_be_changed_in_place() -> None:
    meta = RequestMeta(path="/hooks/github", client="127.0.0.1", size=0)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        meta.size = 10  # type: ignore[misc]


def test_the_walk_makes_new_values_and_keeps_the_first_names() -> None:
    sized = RequestMeta(path="/hooks/github", client="127.0.0.1", size=42)
    named = sized.named_by(_Names(" push ", "d-1"), None)  # type: ignore[arg-type]
    assert (named.event_type, named.delivery_id, named.size) == ("push", "d-1", 42)
    assert named.request_id == sized.request_id
    assert sized.event_type is None
    # a later reading (the payload's) fills only what is still unknown; unprintable is dropped
    later = named.named_by(_Names("other", "d-2"), None)  # type: ignore[arg-type]
    assert later is named
    assert sized.named_by(_Names("bad\x00", None), None) is sized  # type: ignore[arg-type]

"""The judge's `Judgement` is an immutable value: the stages after the judge read what it decided
and cannot change it (its actions are a tuple, its fields frozen)."""

from __future__ import annotations

import asyncio

import attrs
import pytest

from hookwise.engine.actions import ValidationPolicy, WakeAction
from hookwise.engine.judge import judge
from hookwise.engine.request import InboundRequest


def _never(_payload: object) -> InboundRequest:
    raise AssertionError("a built-in hook is judged as its payload: no request is built")


@pytest.mark.parametrize(
    ("sub", "payload"),
    [("wake", {"text": "hello"}), ("agent", {"message": "do it"})],
)
def test_a_judgement_s_actions_cannot_be_changed_after_the_judge(sub: str, payload: dict) -> None:
    judgement = asyncio.run(judge(sub, payload, _never, rules=None, policy=ValidationPolicy()))
    assert isinstance(judgement.actions, tuple) and len(judgement.actions) == 1
    with pytest.raises(AttributeError):
        judgement.actions.append(judgement.actions[0])  # type: ignore[attr-defined]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        judgement.skipped = True  # type: ignore[misc]
    if sub == "wake":
        assert isinstance(judgement.actions[0], WakeAction)

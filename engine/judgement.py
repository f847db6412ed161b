"""`Judgement`: what the judge stage of the hook path decided about one request.

Handed from the judge (`hookwise.engine.judge`) to the accept and answer stages; a value of its
own so that the stages after the judge read what it decided without reaching back into it.
"""

from __future__ import annotations

import attrs

from .actions import Action
from .config.mapping import CoalesceConfig, RespondConfig


@attrs.frozen
class Judgement:
    """What the judge decided about a request: its validated actions, the rule that made them
    and the rule's fixed answer; `skipped` when a transform dropped it; `ignored` when no rule
    matched on a path that acknowledges such requests."""

    actions: tuple[Action, ...]
    rule_id: str | None = None
    respond: RespondConfig | None = None
    skipped: bool = False
    #: the provider's id of this delivery (a rule's `dedupe`), for deduplication
    delivery_id: str | None = None
    #: made by a `forEach` fan-out
    batch: bool = False
    #: no rule matched, and the path acknowledges such requests (`unmatched: acknowledge`)
    ignored: bool = False
    #: where its runs' outcomes are posted when they end (the rule's `callback`)
    callback_url: str | None = None
    #: the rule's `coalesce`, and its key rendered for this request (None: it does not coalesce)
    coalesce: CoalesceConfig | None = None
    coalesce_key: str | None = None
    #: who signed the request, when the rule's `verify` block checked it (`Verifier.sender`);
    #: None: the door's check (or the hook token) says who (`HookRequest.sender`)
    sender: str | None = None

"""Routing a reply: from `channel`/`to` (or `last`) to a concrete channel and recipient.

`last` is the last route of the main session the reply belongs to (the agent's; seeded from `session.lastRoute`, updated by every
successful delivery to an explicit channel and recipient). A request's `to` overrides the
recipient. A mapping's `last` falls back to the first phone-based messenger (`whatsapp`) when
there is no last route and that messenger is configured; an explicit channel without `to` uses
that channel's `defaultTo`.

With no channel configured at all (the quick start) there is nothing to deliver to, and that is
not a failure: the delivery is recorded `skipped` with the reason (the reply stays in the run,
or the heartbeat, and its session). Otherwise, when nothing resolves, the delivery is recorded
`failed` with the reason in words, so the outcome is visible (see `report.delivery_planned`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...engine.config.agents import DEFAULT_MAIN_SESSION
from ...engine.config.channels import LAST, PHONE_BASED
from ..ids import new_id
from ..store.base import Store
from ..store.records import NewDelivery

#: why a reply is not delivered when no channel is configured
NO_CHANNEL = "no channel configured: the reply is kept in the run and its session"


class Router:
    """Builds `NewDelivery` rows for replies."""

    def __init__(
        self, store: Store, channels: Mapping[str, Any], fallback_channel: str | None
    ) -> None:
        self._store = store
        self._channels = channels
        self._default_fallback = fallback_channel

    def _default_to(self, channel: str) -> str | None:
        configured = self._channels.get(channel)
        return getattr(configured, "default_to", None) or None

    async def plan(
        self,
        *,
        text: str,
        channel: str = LAST,
        to: str | None = None,
        fallback_channel: str | None = None,
        from_mapping: bool = False,
        run_id: str | None = None,
        heartbeat_id: str | None = None,
        session: str = DEFAULT_MAIN_SESSION,
    ) -> NewDelivery:
        """The delivery of `text`; `session` is the main session whose last route `last`
        follows (and which a successful send updates)."""

        def row(
            state: str, ch: str | None, rcpt: str | None, error: str | None = None
        ) -> NewDelivery:
            return NewDelivery(
                delivery_id=new_id(),
                text=text,
                state=state,
                channel=ch,
                to=rcpt,
                run_id=run_id,
                heartbeat_id=heartbeat_id,
                fallback_channel=fallback_channel or self._default_fallback,
                last_error=error,
                route_session=session,
            )

        if channel == LAST:
            route = await self._store.last_route(session)
            if route is not None:
                return row("pending", route.channel, to or route.to)
        if not self._channels:
            return row("skipped", None, None, NO_CHANNEL)
        if channel == LAST:
            phone = PHONE_BASED[0]
            if from_mapping and phone in self._channels:
                recipient = to or self._default_to(phone)
                if recipient:
                    return row("pending", phone, recipient)
                return row(
                    "failed",
                    phone,
                    None,
                    f"no last route, and no recipient for the fallback channel {phone}:"
                    f" give `to` or channels.{phone}.defaultTo",
                )
            return row(
                "failed",
                None,
                to,
                "no last route to deliver to (channel: last): no reply was delivered to this"
                " session through a channel yet, and session.lastRoute is not set",
            )
        if channel not in self._channels:
            return row("failed", channel, to, f"channel {channel} is not configured")
        recipient = to or self._default_to(channel)
        if recipient is None:
            return row(
                "failed", channel, None, f"no recipient: give `to` or channels.{channel}.defaultTo"
            )
        return row("pending", channel, recipient)

"""`GET /api/sources`: the pull sources of the process that answers, as they are now.

Each source's connection, lag (as its broker reports it), last error and message counts since
this process started (`hookwise sources` and the console's overview read the same). With several
gateway processes each answers for its own consumers; the metrics sum them.
"""

from __future__ import annotations

from litestar import Controller, Request, get

from ..sources.core import SourceState
from .api import admin_guard
from .models import Answer, Model, iso_or_none


class Source(Model, kw_only=True):
    """One pull source in this process."""

    name: str
    kind: str
    path: str
    connected: bool
    lag: int | None
    last_error: str | None
    last_error_at: str | None
    received: int
    acked: int
    redelivered: int
    duplicates: int
    refused: int
    retried: int
    #: pulling waits while the store holds more queued runs than the source's `maxQueuedRuns`
    waiting_for_lanes: bool

    @classmethod
    def of(cls, s: SourceState) -> Source:
        return cls(
            name=s.name,
            kind=s.kind,
            path=s.path,
            connected=s.connected,
            lag=s.lag,
            last_error=s.last_error,
            last_error_at=iso_or_none(s.last_error_at),
            received=s.received,
            acked=s.acked,
            redelivered=s.redelivered,
            duplicates=s.duplicates,
            refused=s.refused,
            retried=s.retried,
            waiting_for_lanes=s.waiting_for_lanes,
        )


class SourceList(Answer, kw_only=True):
    sources: list[Source]


class SourcesController(Controller):
    path = "/api"
    guards = [admin_guard]
    tags = ["admin"]
    security = [{"bearer": []}]

    @get("/sources", summary="Pull sources: connection, lag, last error, message counts")
    async def sources(self, request: Request) -> SourceList:
        states = request.app.state.gateway.sources.states()
        return SourceList(sources=[Source.of(s) for s in states])

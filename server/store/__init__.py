"""The durable store: the interface the service uses, and its SQLite implementation."""

from .base import (
    Accepted,
    AcceptOp,
    EventRecord,
    NewEvent,
    NewRun,
    Page,
    RequestLogEntry,
    RunRecord,
    Store,
)

__all__ = [
    "AcceptOp",
    "Accepted",
    "EventRecord",
    "NewEvent",
    "NewRun",
    "Page",
    "RequestLogEntry",
    "RunRecord",
    "Store",
]

"""The gateway's pull sources: one consumer task per enabled source, and what they report.

`Sources.start` builds each source's broker client and consumer and runs it in a task of the
gateway's event loop; `stop` cancels them and disconnects. `states()` is what the admin API, the
console and `hookwise sources` show; `problems()` is what `/readyz` adds (a source that is not
connected makes the gateway not ready, while the HTTP door goes on serving).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from ...engine.config.mapping import VerifyConfig
from ...engine.config.sources import SourceConfig
from ...engine.signatures import Verifier, compile_verifier
from ..ingress.dispatch import Dispatcher
from ..ingress.hooks import HookEndpoint
from .core import Broker, Consumer, Pulled, SourceState
from .enter import Entry

log = logging.getLogger("hookwise.sources")


def envelope_verifier(config: SourceConfig, where: str) -> Verifier | None:
    """The check of an SQS source's SNS envelopes (`sqs.sns`): SNS's scheme, its topics."""
    if config.sqs is None or config.sqs.sns is None:
        return None
    sns = config.sqs.sns
    block = VerifyConfig(scheme="sns", topics=sns.topics, keys_url=sns.keys_url)
    return compile_verifier(block, Path.cwd(), f"{where}.sqs.sns")


def broker_for(config: SourceConfig) -> Broker:
    """The broker client of a source's block (its library imported only now)."""
    if config.redis is not None:
        from .redis_streams import RedisBroker

        return RedisBroker(config.redis)
    if config.nats is not None:
        from .nats_jetstream import NatsBroker

        return NatsBroker(config.nats, config.max_in_flight)
    if config.rabbitmq is not None:
        from .rabbitmq import RabbitBroker

        return RabbitBroker(config.rabbitmq, config.max_in_flight)
    if config.sqs is not None:
        from .sqs import SqsBroker

        return SqsBroker(config.sqs)
    raise ValueError(f"source {config.name!r} names no broker")


def missing_library(error: ImportError) -> bool:
    """Whether `error` is a broker's client library that is not installed (the `brokers`
    extra): a module outside hookwise. A module of hookwise's own that fails to import is a
    defect to see, never a source reported as missing its library."""
    name = error.name or ""
    own = __name__.split(".")[0]
    return bool(name) and name != own and not name.startswith(own + ".")


class Sources:
    """The configured pull sources of one gateway process."""

    def __init__(
        self,
        configs: tuple[SourceConfig, ...],
        endpoint: HookEndpoint | None,
        dispatcher: Dispatcher,
    ) -> None:
        self._configs = [c for c in configs if c.enabled] if endpoint is not None else []
        self._endpoint = endpoint
        self._dispatcher = dispatcher
        self.consumers: list[Consumer] = []
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        assert self._endpoint is not None or not self._configs
        for i, config in enumerate(self._configs):
            assert self._endpoint is not None
            entry = Entry(
                config.name,
                config.path,
                self._endpoint,
                self._dispatcher,
                envelope_verifier=envelope_verifier(config, f"sources[{i}]"),
            )
            try:
                broker = broker_for(config)
            except ImportError as e:
                if not missing_library(e):  # one of hookwise's own modules: a defect, raised
                    raise
                consumer = Consumer(config, _Missing(str(e)), entry)  # no `brokers` extra
            else:
                consumer = Consumer(config, broker, entry)
            self.consumers.append(consumer)
            task = asyncio.create_task(
                consumer.run_forever(), name=f"hookwise-source-{config.name}"
            )
            self._tasks.append(task)
            log.info("source %s (%s): pulling into %s", config.name, config.kind, config.path)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for consumer in self.consumers:
            await consumer.stop()
        self._tasks.clear()

    def states(self) -> list[SourceState]:
        return [c.state for c in self.consumers]

    def problems(self) -> list[str]:
        """Why the sources make this process not ready (one line each)."""
        out = []
        for consumer, task in zip(self.consumers, self._tasks, strict=True):
            state = consumer.state
            if task.done():
                out.append(f"source {state.name} is not running")
            elif not state.connected:
                why = f": {state.last_error}" if state.last_error else ""
                out.append(f"source {state.name} is not connected{why}")
        return out


class _Missing:
    """A broker whose client library is missing: it fails to connect, saying so."""

    def __init__(self, error: str) -> None:
        self._error = error

    async def connect(self) -> None:
        raise RuntimeError(f"{self._error} (install hookwise[brokers])")

    async def fetch(self, limit: int) -> list[Pulled]:
        return []

    async def ack(self, handles: object) -> None:
        return None

    refuse = release = ack

    async def lag(self) -> int | None:
        return None

    async def close(self) -> None:
        return None

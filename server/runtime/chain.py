"""Model calls with accounting and fallback: the one way a run or a heartbeat calls a model.

`Accounting` (one per process) knows the price table, the breakers' policy and the store; its
`chain` gives a run (or heartbeat) a `ModelChain`, which a `toolloop.converse` uses as its
provider. Each call goes to the chain's models in turn:

- a model whose breaker is open is skipped (recorded `skipped`, error class `breaker_open`),
  unless it is the chain's last: the last model is always tried, so a chain never fails on
  breakers alone and a single model behaves as it always did. A half-open breaker lets exactly
  one call through (`Store.breaker_probe`), across processes; the others skip it.
- a call failing as *unavailable* (`providers.base.UNAVAILABLE`: connection refused or reset,
  timeouts, 429, 5xx, overload, quota) moves on to the next model; a model that is not the last
  is tried once (its provider's own retries are for the last model), so the fallback answers
  without waiting out backoffs. Any other failure (the caller's fault: 400, 401, 403, a refusal,
  a malformed answer, the run's deadline) ends the call where it happens.
- once a model has answered, the run's later calls (tool rounds) start from it.

Every call and every skip is one `ModelCallRecord`, written to the store when it ends, in the
background and tried again until the store takes it; a run (or heartbeat) waits for its own
records (`Accounting.settle`) before its ending is committed, so whoever sees the run ended sees
what it spent (a budget check in another process counts it). Each record carries (tokens,
cache reads and writes where the provider reports them, cost from `models.prices`: null without a
price or without usage), and counted in the metrics. Unavailable failures are counted on the
model's breaker in the store; a success of a model with a breaker row closes it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from ...engine.config.prices import PriceConfig
from .. import metrics, telemetry
from ..retry import Backoff
from ..store.base import Store, StoreUnavailable
from ..store.modelcalls import BreakerPolicy, BreakerRecord, ModelCallRecord
from .providers.base import ChatMessage, Completion, ProviderError, ProviderTimeout
from .providers.http import HttpProvider
from .providers.registry import Providers

log = logging.getLogger("hookwise.models")

#: the longest error text kept on a call's record
ERROR_CHARS = 300
#: waits between tries of a record's write: 0.25 s, doubling, at most 2 s
RECORD_RETRY = Backoff(base=0.25, cap=2.0, jitter=0.0)
#: tries of a record the store refuses (not merely unavailable) before it is given up
RECORD_TRIES = 5
#: seconds the breakers read from the store serve this process's calls; any process's change
#: of a breaker drops them at once everywhere (the store's `breakers` signal), so this only
#: bounds how stale they are when a signal is lost
BREAKERS_FRESH = 2.0
#: the signal (`Store.notify`) of a breaker that changed
BREAKERS_TOPIC = "breakers"


class Accounting:
    """The process's prices, breaker policy and store, for the chains of its runs."""

    def __init__(
        self,
        store: Store,
        providers: Providers,
        *,
        prices: Mapping[str, PriceConfig],
        breaker: BreakerPolicy,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._providers = providers
        self._prices = dict(prices)
        self.breaker = breaker
        self._clock = clock
        #: the breakers as last read, and when (monotonic); None: read them again
        self._cached: tuple[float, dict[str, BreakerRecord]] | None = None
        self._reading: asyncio.Future[dict[str, BreakerRecord]] | None = None
        self._subscribed = False
        #: bumped by each change of a breaker: a read begun before it is not kept
        self._generation = 0
        #: records being written (see `_record`), by owner (run or heartbeat id)
        self._pending: dict[str, set[asyncio.Task[None]]] = {}

    def cost(self, model: str, call: ModelCallRecord) -> float | None:
        """The cost of a call's tokens, or None (no price for `model`, no usage reported)."""
        price = self._prices.get(model)
        if price is None or not call.reported:
            return None
        return price.cost(
            call.input_tokens, call.output_tokens, call.cache_read_tokens, call.cache_write_tokens
        )

    def chain(
        self,
        models: Sequence[str],
        *,
        owner_id: str,
        agent_id: str,
        rule_id: str | None = None,
        attempt: int = 1,
        sender: str | None = None,
    ) -> ModelChain:
        """The chain of `models` (tried in this order) for one run or heartbeat; `sender`
        (a run's, `none` when it has none; None for a heartbeat) is stamped on its records."""
        return ModelChain(self, tuple(models), owner_id, agent_id, rule_id, attempt, sender)

    async def _breakers(self) -> dict[str, BreakerRecord]:
        """The breakers, read from the store at most once per `BREAKERS_FRESH` seconds (and
        again at once after any process changed one); the calls of that moment share one read."""
        if not self._subscribed:
            self._subscribed = True
            try:
                self._store.subscribe(BREAKERS_TOPIC, self.forget_breakers)
            except Exception as e:  # then only the freshness bounds the cache
                log.warning("watching the model breakers failed: %s: %s", type(e).__name__, e)
        cached = self._cached
        if cached is not None and time.monotonic() - cached[0] < BREAKERS_FRESH:
            return cached[1]
        if self._reading is None:
            self._reading = asyncio.ensure_future(self._read_breakers())
        reading = self._reading
        try:
            return await asyncio.shield(reading)
        finally:
            if self._reading is reading and reading.done():
                self._reading = None

    async def _read_breakers(self) -> dict[str, BreakerRecord]:
        at, generation = time.monotonic(), self._generation
        try:
            found = {b.model: b for b in await self._store.breakers()}
        except Exception as e:  # the breakers never keep a call from being made
            log.warning("reading the model breakers failed: %s: %s", type(e).__name__, e)
            return {}
        if generation == self._generation:
            self._cached = (at, found)
        return found

    def forget_breakers(self) -> None:
        """A breaker changed (in this process or another): read them again on the next call."""
        self._generation += 1
        self._cached = None
        self._reading = None

    async def _changed_breaker(self) -> None:
        """This process changed a breaker: every process forgets what it read."""
        self.forget_breakers()
        try:
            await self._store.notify(BREAKERS_TOPIC)
        except Exception as e:  # the others see it once their read is `BREAKERS_FRESH` old
            log.warning("signalling a breaker's change failed: %s: %s", type(e).__name__, e)

    async def _record(self, record: ModelCallRecord) -> None:
        """Count the call and write its record in the background: the run goes on at once (its
        final write follows the record into the store's queue), and a record the store could
        not take is tried again until it is stored (see `_write`)."""
        metrics.model_call(record)
        task = asyncio.create_task(self._write(record), name=f"hookwise-record-{record.owner_id}")
        owned = self._pending.setdefault(record.owner_id, set())
        owned.add(task)

        def done(task: asyncio.Task[None], owner: str = record.owner_id) -> None:
            left = self._pending.get(owner)
            if left is not None:
                left.discard(task)
                if not left:
                    del self._pending[owner]

        task.add_done_callback(done)

    async def settle(self, owner_id: str) -> None:
        """Wait until the records of `owner_id` (a run or heartbeat) are written (or given up,
        see `_write`): called before the owner's ending is committed, so that the ending is
        never visible before what it spent. The writes go on if the waiter is cancelled."""
        pending = list(self._pending.get(owner_id, ()))
        if pending:
            await asyncio.wait(pending)

    async def _write(self, record: ModelCallRecord) -> None:
        """Write one record, trying again (`RECORD_RETRY`) while the store is unavailable; a
        record the store refuses `RECORD_TRIES` times is given up, loudly."""
        refused = 0
        for attempt in itertools.count():
            try:
                await self._store.record_model_calls([record])
                if attempt:
                    log.warning(
                        "model call %s #%d of %s recorded on try %d",
                        record.model,
                        record.seq,
                        record.owner_id,
                        attempt + 1,
                    )
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:
                unavailable = isinstance(e, (StoreUnavailable, TimeoutError, OSError))
                refused += not unavailable
                gave_up = refused >= RECORD_TRIES
                if attempt == 0 or gave_up:
                    log.error(
                        "model call %s #%d of %s could not be recorded (%s: %s); %s",
                        record.model,
                        record.seq,
                        record.owner_id,
                        type(e).__name__,
                        e,
                        "given up" if gave_up else "trying again until the store takes it",
                    )
                if gave_up:
                    return
                await asyncio.sleep(RECORD_RETRY.step(attempt))

    async def drain(self, timeout: float) -> int:
        """Wait (at most `timeout` seconds) for the records still being written; how many were
        left unwritten."""
        pending = [task for owned in self._pending.values() for task in owned]
        if not pending:
            return 0
        _, left = await asyncio.wait(pending, timeout=timeout)
        for task in left:
            task.cancel()
        if left:
            log.error("%d model call record(s) were not written before the stop", len(left))
        return len(left)

    async def _failed(self, model: str, error_class: str) -> None:
        if not self.breaker.enabled:
            return
        try:
            after = await self._store.breaker_failure(
                model, now=self._clock(), policy=self.breaker, error_class=error_class
            )
        except Exception as e:
            log.warning("counting a failure of %s on its breaker failed: %s", model, e)
            return
        await self._changed_breaker()
        if after.state == "open" and after.failures == self.breaker.failures:
            log.warning(
                "model %s: breaker open for %gs after %d unavailable failures (last: %s)",
                model,
                self.breaker.cooldown,
                after.failures,
                error_class,
            )

    async def _answered(self, model: str, breakers: Mapping[str, BreakerRecord]) -> None:
        if model not in breakers:
            return
        try:
            await self._store.breaker_success(model)
        except Exception as e:
            log.warning("closing the breaker of %s failed: %s", model, e)
            return
        await self._changed_breaker()
        if breakers[model].state == "open":
            log.warning("model %s: breaker closed, the model answered again", model)


class ModelChain:
    """A run's models, called in turn (see the module). Used as the `provider` of
    `toolloop.converse`; its `model` argument is ignored: the chain names its own."""

    def __init__(
        self,
        accounting: Accounting,
        models: tuple[str, ...],
        owner_id: str,
        agent_id: str,
        rule_id: str | None,
        attempt: int,
        sender: str | None = None,
    ) -> None:
        self._acc = accounting
        self._sender = sender
        self.models = models
        self._owner = owner_id
        self._agent = agent_id
        self._rule = rule_id
        self._attempt = attempt
        self._seq = 0
        self._start = 0
        #: the model that wrote the last answer
        self.used: str | None = None

    @property
    def supports_tools(self) -> bool:
        first = self._acc._providers.get(self.models[0].partition("/")[0])
        return bool(getattr(first, "supports_tools", False))

    def _new_record(self, model: str, started: float, **fields: Any) -> ModelCallRecord:
        self._seq += 1
        return ModelCallRecord(
            owner_id=self._owner,
            attempt=self._attempt,
            seq=self._seq,
            model=model,
            agent_id=self._agent,
            rule_id=self._rule,
            started_at=started,
            sender=self._sender,
            **fields,
        )

    async def complete(
        self,
        model: str,
        messages: Sequence[ChatMessage],
        *,
        thinking: str | None,
        deadline: float,
        tools: Sequence[Any] = (),
        tool_choice: str = "auto",
    ) -> Completion:
        acc = self._acc
        breakers = await acc._breakers() if acc.breaker.enabled else {}
        failures: list[tuple[str, ProviderError]] = []
        last_index = len(self.models) - 1
        for i in range(self._start, len(self.models)):
            ref = self.models[i]
            last = i == last_index
            if not last and not await self._admitted(ref, breakers.get(ref)):
                skipped = self._new_record(
                    ref,
                    acc._clock(),
                    outcome="skipped",
                    error_class="breaker_open",
                    status=None,
                    error="the model's circuit breaker is open",
                    duration_ms=0.0,
                )
                await acc._record(skipped)
                failures.append(
                    (ref, ProviderError("its circuit breaker is open", error_class="breaker_open"))
                )
                continue
            started, t0 = acc._clock(), time.perf_counter()
            try:
                completion = await self._call(
                    ref, messages, thinking, deadline, tools, tool_choice, last
                )
            except ProviderError as e:
                ms = round((time.perf_counter() - t0) * 1000, 3)
                await acc._record(
                    self._new_record(
                        ref,
                        started,
                        outcome="error",
                        error_class=e.error_class,
                        status=e.status,
                        error=e.message[:ERROR_CHARS],
                        duration_ms=ms,
                    )
                )
                if e.unavailable:
                    await acc._failed(ref, e.error_class)
                failures.append((ref, e))
                if isinstance(e, ProviderTimeout) or not e.unavailable or last:
                    raise _chain_error(failures) from None
                log.warning(
                    "%s: model %s unavailable (%s); falling back to %s",
                    self._owner,
                    ref,
                    e.error_class,
                    self.models[i + 1],
                )
                continue
            ms = round((time.perf_counter() - t0) * 1000, 3)
            usage = completion.usage
            record = self._new_record(
                ref,
                started,
                outcome="ok",
                error_class=None,
                status=None,
                error=None,
                duration_ms=ms,
                input_tokens=usage.input_tokens if usage else None,
                output_tokens=usage.output_tokens if usage else None,
                cache_read_tokens=usage.cache_read if usage else None,
                cache_write_tokens=usage.cache_write if usage else None,
            )
            record = _with_cost(record, acc.cost(ref, record))
            await acc._record(record)
            await acc._answered(ref, breakers)
            self._start, self.used = i, ref
            return completion
        raise _chain_error(failures)

    async def _admitted(self, ref: str, breaker: BreakerRecord | None) -> bool:
        """Whether `ref` may be called now: its breaker closed, or this is its half-open try."""
        if breaker is None:
            return True
        now = self._acc._clock()
        state = breaker.state_at(now)
        if state == "closed":
            return True
        if state == "open":
            return False
        try:
            probing = await self._acc._store.breaker_probe(ref, now=now, lease=60.0)
        except Exception as e:
            log.warning("claiming the half-open try of %s failed: %s", ref, e)
            return False
        if probing:
            await self._acc._changed_breaker()
        return probing

    async def _call(
        self,
        ref: str,
        messages: Sequence[ChatMessage],
        thinking: str | None,
        deadline: float,
        tools: Sequence[Any],
        tool_choice: str,
        last: bool,
    ) -> Completion:
        provider, model = self._acc._providers.resolve(ref)
        kwargs: dict[str, Any] = {}
        if tools and getattr(provider, "supports_tools", False):
            kwargs.update(tools=tools, tool_choice=tool_choice)
        if not last and isinstance(provider, HttpProvider):
            kwargs["retries"] = False
        with telemetry.model_call(ref.split("/", 1)[0], model) as span:  # tracing (GenAI)
            completion = await provider.complete(
                model, messages, thinking=thinking, deadline=deadline, **kwargs
            )
            usage = completion.usage
            telemetry.model_answered(
                span,
                completion.model,
                usage.input_tokens if usage else None,
                usage.output_tokens if usage else None,
            )
        return completion

    async def aclose(self) -> None:
        """Nothing to close: the providers belong to the process."""


def _with_cost(record: ModelCallRecord, cost: float | None) -> ModelCallRecord:
    return attrs.evolve(record, cost=cost)


def _chain_error(failures: list[tuple[str, ProviderError]]) -> ProviderError:
    """The error of a call that no model of the chain answered: the only failure as it was, or
    one naming why each model failed (the last one's class and status)."""
    if len(failures) == 1:
        return failures[0][1]
    last = failures[-1][1]
    reasons = "; ".join(f"{ref}: {e.message}" for ref, e in failures)
    error = ProviderError(
        f"no model of the chain answered ({reasons})",
        status=last.status,
        error_class=last.error_class,
    )
    return ProviderTimeout(error.message) if isinstance(last, ProviderTimeout) else error

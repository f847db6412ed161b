"""The bounded store wait (`server/store/bounded.py`): a write not answered within its time is
`StoreUnavailable`, one answered is its value, and a cancellation from anyone else stays a
cancellation; the waits of a loop share one sweep that does not keep finished waits."""

from __future__ import annotations

import asyncio

import pytest

from hookwise.server.store import bounded
from hookwise.server.store.base import StoreUnavailable
from hookwise.server.store.bounded import within_store_wait


def test_a_write_never_answered_is_store_unavailable() -> None:
    async def main() -> None:
        never = asyncio.get_running_loop().create_future()
        with pytest.raises(StoreUnavailable, match=r"did not answer within 0\.05 s"):
            await within_store_wait(never, 0.05)
        # the task was not left cancelled: it goes on awaiting
        await asyncio.sleep(0)

    asyncio.run(main())


def test_an_answered_write_is_its_value_and_the_task_stays_usable() -> None:
    async def main() -> list[int]:
        loop = asyncio.get_running_loop()
        got = []
        for n in range(50):
            fut = loop.create_future()
            loop.call_soon(fut.set_result, n)
            got.append(await within_store_wait(fut, 0.05))
        await asyncio.sleep(0.1)  # past every deadline: nothing fires on this task
        return got

    assert asyncio.run(main()) == list(range(50))


def test_a_cancellation_from_elsewhere_is_not_turned_into_unavailable() -> None:
    async def main() -> None:
        never = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(within_store_wait(never, 10.0))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_waits_of_several_lengths_each_end_at_their_own() -> None:
    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        long_write = loop.create_future()
        loop.call_later(0.2, long_write.set_result, "stored")

        async def short() -> str:
            try:
                await within_store_wait(loop.create_future(), 0.05)
            except StoreUnavailable:
                return "unavailable"
            return "answered"

        return list(await asyncio.gather(within_store_wait(long_write, 5.0), short(), short()))

    assert asyncio.run(main()) == ["stored", "unavailable", "unavailable"]


def test_finished_waits_are_not_kept() -> None:
    async def main() -> int:
        loop = asyncio.get_running_loop()
        for n in range(2000):
            fut = loop.create_future()
            fut.set_result(n)
            await within_store_wait(fut, 30.0)
        return len(bounded._deadlines(loop, 30.0)._waits)

    assert asyncio.run(main()) <= 1

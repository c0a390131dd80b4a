"""`BatchWriter`: one write in flight, the items added meanwhile written next."""

from __future__ import annotations

import asyncio
from typing import Any

from jobsched._batcher import BatchWriter


class Store:
    """A write that waits for `release` each time, recording its batches."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.gate = asyncio.Event()
        self.writing = asyncio.Event()  # a write began
        self.running = 0
        self.most_running = 0

    async def write(self, batch: list[int]) -> None:
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        self.batches.append(batch)
        self.writing.set()
        await self.gate.wait()
        self.running -= 1


async def test_one_write_at_a_time_and_the_rest_in_the_next_batch() -> None:
    store = Store()
    writer = BatchWriter(store.write, name="test")
    for i in range(3):
        writer.add(i)  # one burst: one batch
    await store.writing.wait()
    assert store.batches == [[0, 1, 2]]
    writer.add(3)
    writer.add(4)
    assert writer.busy and len(writer) == 2
    store.gate.set()
    await writer.drain()
    assert store.batches == [[0, 1, 2], [3, 4]]
    assert store.most_running == 1 and not writer.busy


async def test_drain_waits_for_what_was_added_before_it_only() -> None:
    store = Store()
    writer = BatchWriter(store.write, name="test")
    writer.add(1)
    drained = asyncio.ensure_future(writer.drain())
    await store.writing.wait()
    writer.add(2)  # after drain began: not waited for
    store.gate.set()
    await drained
    assert store.batches[0] == [1]
    await writer.drain()
    assert store.batches == [[1], [2]]


async def test_a_held_writer_writes_nothing_until_released() -> None:
    store = Store()
    store.gate.set()
    writer = BatchWriter(store.write, name="test", held=True)
    writer.add(1)
    await writer.drain()  # held: nothing to wait for
    assert store.batches == [] and not writer.busy and len(writer) == 1
    writer.release()
    await writer.drain()
    assert store.batches == [[1]]


async def test_a_write_that_raises_is_reported_and_the_next_batch_written() -> None:
    reported: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: reported.append(context))
    written: list[list[str]] = []

    async def write(batch: list[str]) -> None:
        if batch == ["bad"]:
            raise RuntimeError("boom")
        written.append(batch)

    writer = BatchWriter(write, name="test")
    writer.add("bad")
    await writer.drain()
    writer.add("good")
    await writer.drain()
    assert written == [["good"]]
    assert [str(c["exception"]) for c in reported] == ["boom"]
    assert "test: a batch write raised" in reported[0]["message"]

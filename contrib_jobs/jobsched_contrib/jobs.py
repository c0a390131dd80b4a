"""The reference design's example jobs, with its constructor signatures and behaviour.

They are written the reference's way, with a hand-written ``__init__`` that
calls ``super().__init__(name, **kw)``: the options (``priority``,
``timeout``, ``retry``, ``deadline``) pass through ``**kw``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from jobsched import AsyncJob, BlockingJob, CpuBoundJob


class EmailJob(AsyncJob):
    """I/O-bound: awaits the network, so it belongs on the event loop."""

    def __init__(self, to: str, subject: str, latency: float = 0.05, **kw: Any) -> None:
        super().__init__(f"email {to}: {subject}", **kw)
        self.to = to
        self.latency = latency

    async def run(self) -> str:
        await asyncio.sleep(self.latency)
        return f"sent to {self.to}"


class FlakyUploadJob(AsyncJob):
    """Fails its first `failures` attempts, then succeeds. Exercises retries."""

    def __init__(self, path: str, failures: int, **kw: Any) -> None:
        super().__init__(f"upload {path}", **kw)
        self.failures = failures

    async def run(self) -> str:
        await asyncio.sleep(0.01)
        if self.attempts <= self.failures:
            raise ConnectionError(f"attempt {self.attempts}: connection reset")
        return "uploaded"


class SleepJob(AsyncJob):
    """Sleeps for `seconds` on the event loop and returns them."""

    def __init__(self, name: str, seconds: float, **kw: Any) -> None:
        super().__init__(name, **kw)
        self.seconds = seconds

    async def run(self) -> float:
        await asyncio.sleep(self.seconds)
        return self.seconds


class CsvExportJob(BlockingJob):
    """Blocking I/O (a sync DB driver, say): runs in the thread pool."""

    def __init__(self, table: str, rows: int = 1_000, **kw: Any) -> None:
        super().__init__(f"export {table}", **kw)
        self.rows = rows

    def run_sync(self) -> int:
        time.sleep(0.02)  # releases the GIL while "waiting on the DB"
        return self.rows


class PrimeCountJob(CpuBoundJob):
    """CPU-bound: counts primes below n. Runs in a separate process."""

    def __init__(self, n: int, **kw: Any) -> None:
        super().__init__(f"count primes < {n}", **kw)
        self.n = n

    def run_sync(self) -> int:
        sieve = bytearray([1]) * self.n
        sieve[:2] = b"\x00\x00"
        for i in range(2, int(self.n**0.5) + 1):
            if sieve[i]:
                sieve[i * i :: i] = bytearray(len(range(i * i, self.n, i)))
        return sum(sieve)

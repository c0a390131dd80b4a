"""The soak's client processes: ``python -m benchmarks.chaos.producer ROLE ...``.

``producer`` submits batches of the job mix through `jobsched.Client` until
``--until`` (wall time), writing each batch's keys to the ledger before it
sends it (``intent``) and the ids it got after (``submitted``). ``canceller``
follows the producers' ledgers and cancels long jobs from another process.
Both also serve the recurring schedule (a schedule fires once per period
however many processes serve it). SIGTERM stops either cleanly.

``forker`` (the ``producer_fork`` fault) opens a `jobsched.BlockingClient`,
submits a batch, forks, and submits a batch from the child through the same
client (which must reopen itself there) and one more from the parent; a
child that is not done within `FORK_WAIT` seconds is killed; the parent
reports how its child ended (``fork_child``, ``ok`` false unless it exited 0).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.chaos import jobs, ledger
from jobsched import BlockingClient, Client, PluginManager, Submission

RETRY_NONE = {"policy": "none"}
#: Flaky jobs fail one or two attempts, then succeed.
RETRY_FLAKY = {"policy": "fixed", "seconds": 0.2, "max_retries": 3}
#: A doomed chain head fails for good: its dependents are cancelled (a cascade).
RETRY_DOOMED = {"policy": "fixed", "seconds": 0.1, "max_retries": 1}
#: How often the recurring schedule fires, in seconds.
TICK_EVERY = 1.0
UNIQUE_KEYS = 4
#: Seconds a forked producer's child may take to submit its batch.
FORK_WAIT = 30.0


def plugins() -> PluginManager:
    return PluginManager([jobs], autoload=False)


def tick(folder: str) -> jobs.Chaos:
    """The recurring schedule's job (the same in every process: one schedule)."""
    return jobs.Chaos(ledger=folder, kind="tick")


class Batch:
    """One `submit_many` batch of the job mix and what the ledger says about it."""

    def __init__(self, rng: random.Random, folder: str, name: str, size: int) -> None:
        self.name = name
        self.items: list[Submission] = []
        self.deps: dict[int, list[int]] = {}  # index -> indexes of its upstreams
        self.unique: dict[int, str] = {}
        self.targets: list[int] = []  # long jobs the canceller may cancel
        while len(self.items) < size:
            r = rng.random()
            if r < 0.05:
                # A thread job: it runs unless abandoned threads fill the pool.
                self._add(jobs.ChaosThread(ledger=folder, seconds=rng.uniform(0.05, 0.3)))
            elif r < 0.25:
                self._add(jobs.Chaos(ledger=folder, kind="noop"))
            elif r < 0.50:
                self._add(jobs.Chaos(ledger=folder, kind="sleep", seconds=rng.uniform(0.05, 0.8)))
            elif r < 0.62:
                job = jobs.Chaos(ledger=folder, kind="flaky", fail_times=rng.randint(1, 2))
                self._add(job, retry=RETRY_FLAKY)
            elif r < 0.80:
                if rng.random() < 0.3:
                    head = self._add(
                        jobs.Chaos(ledger=folder, kind="doomed", fail_times=99),
                        retry=RETRY_DOOMED,
                    )
                else:
                    head = self._add(jobs.Chaos(ledger=folder, kind="sleep", seconds=0.1))
                middle = self._add(jobs.Chaos(ledger=folder, kind="sleep", seconds=0.1), [head])
                self._add(jobs.Chaos(ledger=folder, kind="noop"), [middle])
            elif r < 0.92:
                seconds = rng.uniform(2.0, 4.0)
                self.targets.append(
                    self._add(jobs.Chaos(ledger=folder, kind="sleep", seconds=seconds))
                )
            else:
                key = f"u{rng.randrange(UNIQUE_KEYS)}"
                index = self._add(
                    jobs.Chaos(ledger=folder, kind="sleep", seconds=0.5), unique_key=key
                )
                self.unique[index] = key

    def _add(
        self,
        job: jobs.Chaos | jobs.ChaosThread,
        upstreams: list[int] = (),  # type: ignore[assignment]
        *,
        retry: dict[str, Any] = RETRY_NONE,
        unique_key: str | None = None,
    ) -> int:
        index = len(self.items)
        # A key makes the batch's atomicity checkable (a unique-keyed job may
        # be deduplicated, so it has none).
        key = None if unique_key else f"{self.name}-{index}"
        self.items.append(
            Submission(
                job,
                depends_on=[self.items[i].job for i in upstreams],
                key=key,
                unique_key=unique_key,
                retry=retry,
            )
        )
        if upstreams:
            self.deps[index] = list(upstreams)
        return index

    @property
    def keys(self) -> list[str]:
        return [s.key for s in self.items if s.key is not None]

    def submitted(self, ids: list[str]) -> dict[str, Any]:
        return {
            "e": "submitted",
            "batch": self.name,
            "ids": ids,
            "deps": {ids[i]: [ids[u] for u in ups] for i, ups in self.deps.items()},
            "unique": {ids[i]: key for i, key in self.unique.items()},
            "targets": [ids[i] for i in self.targets],
        }


async def produce(args: argparse.Namespace, stop: asyncio.Event) -> None:
    rng = random.Random(f"{args.seed}/{args.generation}")
    interval = args.batch / args.rate
    async with Client(args.store, plugins=plugins()) as client:
        await client.add_schedule(tick(args.ledger), every=TICK_EVERY)
        n = 0
        next_at = time.monotonic()
        while time.time() < args.until and not stop.is_set():
            batch = Batch(rng, args.ledger, f"g{args.generation}b{n}", args.batch)
            n += 1
            await asyncio.to_thread(
                ledger.append,
                args.ledger,
                "producer",
                {"e": "intent", "batch": batch.name, "keys": batch.keys},
            )
            ids = await client.submit_many(batch.items)
            await asyncio.to_thread(ledger.append, args.ledger, "producer", batch.submitted(ids))
            next_at += interval
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, next_at - time.monotonic()))
        await stop.wait()  # keep serving the schedule until told to stop


async def cancel(args: argparse.Namespace, stop: asyncio.Event) -> None:
    rng = random.Random(f"{args.seed}/cancel/{args.generation}")
    offsets: dict[Path, int] = {}
    targets: list[str] = []
    async with Client(args.store, plugins=plugins()) as client:
        await client.add_schedule(tick(args.ledger), every=TICK_EVERY)
        while not stop.is_set():
            for path in sorted(Path(args.ledger).glob("producer-*.jsonl")):
                records, offsets[path] = ledger.follow(path, offsets.get(path, 0))
                targets += [t for r in records if r["e"] == "submitted" for t in r["targets"]]
            if targets and rng.random() < args.cancel_share:
                job_id = targets.pop(rng.randrange(len(targets)))
                ok = await client.cancel(job_id)
                await asyncio.to_thread(
                    ledger.append,
                    args.ledger,
                    "canceller",
                    {"e": "cancel", "job": job_id, "ok": ok},
                )
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), rng.uniform(0.1, 0.5))


def fork_produce(args: argparse.Namespace) -> None:
    """Submit a batch, fork, submit one from the child and one more here."""
    rng = random.Random(f"{args.seed}/fork/{args.generation}")
    name = f"f{args.generation}"

    def submit(client: BlockingClient, batch: Batch) -> None:
        intent = {"e": "intent", "batch": batch.name, "keys": batch.keys}
        ledger.append(args.ledger, "producer", intent)
        ids = client.submit_many(batch.items)
        ledger.append(args.ledger, "producer", batch.submitted(ids))

    with BlockingClient(args.store, plugins=plugins()) as client:
        submit(client, Batch(rng, args.ledger, f"{name}p0", args.batch))
        child_batch = Batch(rng, args.ledger, f"{name}c", args.batch)
        pid = os.fork()
        if pid == 0:
            # The child's first call reopens the client; then it exits as a
            # program does (leaving the with block closes its own client).
            submit(client, child_batch)
            sys.exit(0)
        give_up = time.monotonic() + FORK_WAIT
        status = None
        while status is None and time.monotonic() < give_up:
            done, code = os.waitpid(pid, os.WNOHANG)
            status = os.waitstatus_to_exitcode(code) if done else None
            time.sleep(0.05)
        reason = None
        if status is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            reason = f"its child was killed after {FORK_WAIT:g} s"
        elif status != 0:
            reason = f"its child exited with status {status}"
        report = {"e": "fork_child", "ok": reason is None, "child": pid, "reason": reason}
        ledger.append(args.ledger, "producer", report)
        submit(client, Batch(rng, args.ledger, f"{name}p1", args.batch))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.chaos.producer")
    parser.add_argument("role", choices=["producer", "canceller", "forker"])
    parser.add_argument("--store", required=True)
    parser.add_argument("--ledger", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--generation", type=int, default=0)
    parser.add_argument("--rate", type=float, default=20.0, help="jobs per second")
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--until", type=float, default=0.0, help="wall time to stop producing")
    parser.add_argument("--cancel-share", type=float, default=0.5)
    args = parser.parse_args()
    if args.role == "forker":
        fork_produce(args)
        return

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        if args.role == "producer":
            await produce(args, stop)
        else:
            await cancel(args, stop)

    asyncio.run(run())


if __name__ == "__main__":
    main()

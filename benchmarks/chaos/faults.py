"""The soak's faults: what each one does, where it applies, and when it strikes.

Every fault is switchable (``--faults``, `parse_faults`); the enabled ones
strike one at a time, at random times drawn from the seed, one every
``--fault-every`` seconds on average (`Faults.run`).

* **Infrastructure faults** hit processes and connections: ``kill9``,
  ``stop``, ``pg_terminate`` (PostgreSQL), ``producer_kill`` and
  ``kill9_writing`` (SQLite). They explain the re-runs they cause (a `Fault`).
* **Job faults** submit a job that misbehaves (``nul_result``,
  ``nul_error``, ``spin``, ``block``, ``fork``, ``print``: see
  `benchmarks.chaos.jobs`) or tamper with a stored row (``tampered``).
* **Deployment faults** start a worker with an older task module
  (``old_module``) or a producer that forks after opening its client
  (``producer_fork``).

Job and deployment faults explain nothing (a `JobFault`): the cluster must
take them without running anything twice or losing anything.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
import time
from pathlib import Path
from typing import Any, Protocol

from benchmarks.chaos import jobs
from benchmarks.chaos.check import ALL_WORKERS, Fault, JobFault
from benchmarks.chaos.processes import Processes
from jobsched import Client

BOTH = frozenset({"postgresql", "sqlite"})
#: name -> (the stores it applies to, what it does): docs/reliability.md's table.
FAULTS: dict[str, tuple[frozenset[str], str]] = {
    "kill9": (BOTH, "SIGKILL a worker; start a replacement"),
    "stop": (BOTH, "SIGSTOP a worker for the lease plus 0.5-2 s, then SIGCONT"),
    "pg_terminate": (frozenset({"postgresql"}), "pg_terminate_backend every worker connection"),
    "producer_kill": (frozenset({"sqlite"}), "SIGKILL the producer mid-batch; start a new one"),
    "kill9_writing": (frozenset({"sqlite"}), "SIGKILL a worker while writes are heaviest"),
    "nul_result": (BOTH, "a job returns text with a NUL byte"),
    "nul_error": (BOTH, "a job raises an error whose message has a NUL byte"),
    "spin": (BOTH, "an async job spins the event loop forever (a poison job)"),
    "block": (BOTH, "a thread job blocks its thread forever (1.5 s timeout)"),
    "fork": (BOTH, "a job forks a child that exits with sys.exit in the worker's copy"),
    "print": (BOTH, "a job prints 1-8 MB to stdout"),
    "tampered": (BOTH, "a pending row's args are overwritten with a list or junk"),
    "old_module": (BOTH, "a worker with an older task module runs for a few seconds"),
    "producer_fork": (BOTH, "a producer forks after opening its BlockingClient"),
}
#: The faults of the soak before the job faults: what ``--faults infra`` names.
INFRA = ("kill9", "stop", "pg_terminate", "producer_kill", "kill9_writing")
RETRY_NONE = {"policy": "none"}
#: Seconds a ``block`` job may run: its thread is abandoned then.
BLOCK_TIMEOUT = 1.5
#: Seconds a ``tampered`` job waits to start: its row is tampered with meanwhile.
TAMPER_DELAY = 2.0


class BadFaults(ValueError):
    """A ``--faults`` list that names an unknown fault."""


def parse_faults(text: str) -> list[str]:
    """The faults a ``--faults`` value names: a comma-separated list of names,
    ``all`` (every fault) and ``infra`` (`INFRA`), in `FAULTS` order."""
    wanted: set[str] = set()
    for name in (part.strip() for part in text.split(",")):
        if name == "all":
            wanted.update(FAULTS)
        elif name == "infra":
            wanted.update(INFRA)
        elif name in FAULTS:
            wanted.add(name)
        else:
            raise BadFaults(
                f"--faults: unknown fault {name!r} (faults: all, infra, {', '.join(FAULTS)})"
            )
    return [name for name in FAULTS if name in wanted]


def applicable(names: list[str], store_kind: str) -> list[str]:
    """The faults of `names` that apply to a store of `store_kind`."""
    return [name for name in names if store_kind in FAULTS[name][0]]


class Tamper(Protocol):
    """What a fault needs of the store under test (`soak.Store`)."""

    kind: str
    lease: float

    def terminate_workers(self) -> int: ...

    def tamper(self, job_id: str, args_text: str) -> bool: ...


class Faults:
    """The enabled faults (those of `names` that apply to the store), at random
    times drawn from the seed; `done` and `job_faults` are what struck."""

    def __init__(
        self,
        args: argparse.Namespace,
        store: Tamper,
        procs: Processes,
        client: Client,
        names: list[str],
    ) -> None:
        self.rng = random.Random(args.seed)
        self.every = args.fault_every
        self.store = store
        self.procs = procs
        self.client = client
        self.kinds = applicable(names, store.kind)
        self.done: list[Fault] = []
        self.job_faults: list[JobFault] = []
        # What is to happen later (a paused worker resumes, an old one stops).
        self._later_actions: dict[asyncio.Task[None], Any] = {}
        #: When the producer stops producing (wall time): a new producer's too.
        self.until = 0.0

    async def run(self, until: float) -> None:
        if not self.kinds:
            return
        while True:
            await asyncio.sleep(self.rng.uniform(0.5 * self.every, 1.5 * self.every))
            if time.time() >= until:
                return
            kind = self.rng.choice(self.kinds)
            await getattr(self, kind)()

    async def watch_workers(self) -> None:
        """Replace a worker that ended by itself (its watchdog ended it, say):
        its jobs run again elsewhere, as after a kill (an ``exited`` fault)."""
        while True:
            for proc in self.procs.poll_ends():
                now = time.time()
                self.done.append(Fault("exited", proc.pid, now, now))
                if proc.pid not in self.procs.old:
                    self.procs.start_worker()
            await asyncio.sleep(0.2)

    async def finish(self) -> None:
        """End the faults still under way now (paused workers resume, old ones stop)."""
        pending = list(self._later_actions.items())
        self._later_actions.clear()
        for task, action in pending:
            task.cancel()
            action()
        await asyncio.gather(*(task for task, _ in pending), return_exceptions=True)
        self.procs.resume_all()

    def _later(self, seconds: float, action: Any) -> None:
        async def run() -> None:
            await asyncio.sleep(seconds)
            self._later_actions.pop(task, None)
            action()

        task = asyncio.create_task(run())
        self._later_actions[task] = action

    def _victim(self) -> Any:
        live = [w for w in self.procs.live_workers() if w.pid not in self.procs.stopped]
        return self.rng.choice(live) if live else None

    # ── infrastructure faults ───────────────────────────────────────
    async def kill9(self, kind: str = "kill9") -> None:
        victim = self._victim()
        if victim is None:
            return
        await asyncio.to_thread(self.procs.kill, victim)
        now = time.time()
        self.done.append(Fault(kind, victim.pid, now, now))
        self.procs.start_worker()

    async def kill9_writing(self) -> None:
        # Right after the producer announces a batch: its insert, the claims
        # it wakes and their results all want the write lock now.
        path = Path(self.procs.ledger)
        files = sorted(path.glob("producer-*.jsonl"), key=lambda p: p.stat().st_mtime)
        if files:
            start = files[-1].stat().st_size
            give_up = time.monotonic() + 5
            while files[-1].stat().st_size == start and time.monotonic() < give_up:
                await asyncio.sleep(0.005)
        await self.kill9("kill9_writing")

    async def stop(self) -> None:
        victim = self._victim()
        if victim is None:
            return
        pause = self.store.lease + self.rng.uniform(0.5, 2.0)
        victim.send_signal(signal.SIGSTOP)
        self.procs.stopped.add(victim.pid)
        fault = Fault("stop", victim.pid, time.time(), float("inf"))
        self.done.append(fault)

        def resume() -> None:
            victim.send_signal(signal.SIGCONT)
            self.procs.stopped.discard(victim.pid)
            self.done[self.done.index(fault)] = Fault("stop", victim.pid, fault.t0, time.time())

        self._later(pause, resume)

    async def pg_terminate(self) -> None:
        t0 = time.time()
        await asyncio.to_thread(self.store.terminate_workers)
        self.done.append(Fault("pg_terminate", ALL_WORKERS, t0, time.time()))

    async def producer_kill(self) -> None:
        producer = self.procs.producer
        if producer is None or producer.poll() is not None:
            return
        producer.kill()
        await asyncio.to_thread(producer.wait)
        now = time.time()
        self.done.append(Fault("producer_kill", producer.pid, now, now))
        self.procs.start_producer(self.until)

    # ── job faults ──────────────────────────────────────────────────
    async def _submit(self, kind: str, job: Any, **options: Any) -> str:
        t0 = time.time()
        job_id = await self.client.submit(job, retry=RETRY_NONE, **options)
        self.job_faults.append(JobFault(kind, job_id, None, t0, time.time()))
        return job_id

    def _chaos(self, fault: str, **fields: Any) -> jobs.Chaos:
        return jobs.Chaos(ledger=self.procs.ledger, kind="fault", fault=fault, **fields)

    async def nul_result(self) -> None:
        await self._submit("nul_result", self._chaos("nul_result"))

    async def nul_error(self) -> None:
        await self._submit("nul_error", self._chaos("nul_error"))

    async def spin(self) -> None:
        await self._submit("spin", self._chaos("spin"))

    async def fork(self) -> None:
        await self._submit("fork", self._chaos("fork"))

    async def print(self) -> None:
        size = self.rng.randint(1, 8) * 1_000_000
        await self._submit("print", self._chaos("print", size=size))

    async def block(self) -> None:
        job = jobs.ChaosThread(ledger=self.procs.ledger, kind="fault", fault="block")
        await self._submit("block", job, timeout=BLOCK_TIMEOUT)

    async def tampered(self) -> None:
        # A job of its own, not yet due, whose row then holds args that are
        # no mapping (or no JSON at all, where the column can hold that).
        job = jobs.Chaos(ledger=self.procs.ledger, kind="noop")
        t0 = time.time()
        job_id = await self.client.submit(job, retry=RETRY_NONE, delay=TAMPER_DELAY)
        junk = ["[1, 2]", '"text"'] if self.store.kind == "postgresql" else ["[1, 2]", "{not json"]
        if await asyncio.to_thread(self.store.tamper, job_id, self.rng.choice(junk)):
            self.job_faults.append(JobFault("tampered", job_id, None, t0, time.time()))

    # ── deployment faults ───────────────────────────────────────────
    async def old_module(self) -> None:
        worker = self.procs.start_worker(old=True)
        t0 = time.time()
        seconds = self.store.lease + self.rng.uniform(1.0, 4.0)
        self.job_faults.append(JobFault("old_module", None, worker.pid, t0, t0 + seconds))
        self._later(seconds, lambda: self.procs.stop(worker))

    async def producer_fork(self) -> None:
        forker = self.procs.start_forker()
        now = time.time()
        self.job_faults.append(JobFault("producer_fork", None, forker.pid, now, now))

"""The soak's processes: workers, producers, the canceller, and what became of each.

Workers are ``jobsched worker`` processes with the soak's task module
(`benchmarks.chaos.jobs`) installed as a plugin distribution; an *old*
worker has `benchmarks.chaos.jobs_old` instead (the ``old_module`` fault).
Every worker's life is kept (`life`): when it started, when it ended and
how (killed by a fault, exited by itself, stopped by SIGTERM, or still
running long after SIGTERM), which the checks read from the ledger
(``process`` records).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parents[2]
#: The workers' ``--grace``: seconds running jobs get to finish on SIGTERM.
GRACE = 10.0


class StoreURLs(Protocol):
    """What the processes need of the store under test (`soak.Store`)."""

    worker_url: str
    client_url: str


def _site(folder: Path, module: str) -> Path:
    """A folder to put on ``PYTHONPATH`` that installs `module` as the plugin ``chaos``."""
    info = folder / "jobsched_chaos_soak-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: jobsched-chaos-soak\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text(f"[jobsched]\nchaos = {module}\n")
    return folder


class Processes:
    """The worker, producer, canceller and forking-producer subprocesses, and their logs."""

    def __init__(self, args: argparse.Namespace, store: StoreURLs, folder: Path) -> None:
        self.args = args
        self.store = store
        self.folder = folder
        self.ledger = str(folder / "ledger")
        self.logs = folder / "logs"
        self.logs.mkdir()
        self._sites = {
            old: _site(folder / ("site-old" if old else "site"), module)
            for old, module in (
                (False, "benchmarks.chaos.jobs"),
                (True, "benchmarks.chaos.jobs_old"),
            )
        }
        self.workers: list[subprocess.Popen[bytes]] = []
        #: Workers with the old task module (not replaced when they end).
        self.old: set[int] = set()
        self.stopped: set[int] = set()  # SIGSTOPped now
        self.producer: subprocess.Popen[bytes] | None = None
        self.canceller: subprocess.Popen[bytes] | None = None
        self.forkers: list[subprocess.Popen[bytes]] = []
        self.generation = 0
        #: pid -> the worker's life: start, end, how, stop_requested.
        self.life: dict[int, dict[str, Any]] = {}

    def _env(self, *, old: bool = False) -> dict[str, str]:
        path = [str(self._sites[old]), str(ROOT), os.environ.get("PYTHONPATH", "")]
        # CHAOS_LEDGER makes the task module beat in every worker's loop.
        return {**os.environ, "PYTHONPATH": os.pathsep.join(path), "CHAOS_LEDGER": self.ledger}

    def _spawn(
        self, name: str, argv: list[str], *, old: bool = False, session: bool = False
    ) -> subprocess.Popen[bytes]:
        log = (self.logs / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            argv,
            env=self._env(old=old),
            stdout=log,
            stderr=log,
            cwd=ROOT,
            start_new_session=session,
        )
        log.close()
        return proc

    # ── workers ─────────────────────────────────────────────────────
    def start_worker(self, *, old: bool = False) -> subprocess.Popen[bytes]:
        name = f"worker-{len(self.workers)}" + ("-old" if old else "")
        proc = self._spawn(
            name,
            [
                sys.executable,
                "-m",
                "jobsched",
                "worker",
                "--store",
                self.store.worker_url,
                "--workers",
                str(self.args.slots),
                "--log-format",
                "json",
                "--grace",
                f"{GRACE:g}",
                # The bound the soak checks poison jobs against is the workers' own.
                "--max-lease-expiries",
                str(self.args.lease_expiry_bound),
            ],
            old=old,
        )
        self.workers.append(proc)
        if old:
            self.old.add(proc.pid)
        self.life[proc.pid] = {"start": time.time(), "end": None, "how": None}
        return proc

    def live_workers(self) -> list[subprocess.Popen[bytes]]:
        """The workers running now with the current task module."""
        return [w for w in self.workers if w.poll() is None and w.pid not in self.old]

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL a worker (a fault) and reap it."""
        self.life[proc.pid]["how"] = "killed"
        proc.kill()
        proc.wait()
        self.life[proc.pid]["end"] = time.time()

    def poll_ends(self) -> list[subprocess.Popen[bytes]]:
        """Note the workers that ended since the last call; those that exited
        by themselves (not killed, not told to stop) are returned."""
        now = time.time()
        gone = []
        for proc in self.workers:
            life = self.life[proc.pid]
            if life["end"] is not None or life["how"] == "killed" or proc.poll() is None:
                continue
            life["end"] = now
            if "stop_requested" in life:
                life["how"] = "stopped"
            else:
                life["how"] = "exited"
                gone.append(proc)
        return gone

    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        """Tell one worker to stop (SIGTERM), as a deploy does."""
        if proc.poll() is None:
            self.life[proc.pid]["stop_requested"] = time.time()
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)

    def resume_all(self) -> None:
        for proc in self.workers:
            if proc.pid in self.stopped and proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
        self.stopped.clear()

    # ── clients ─────────────────────────────────────────────────────
    def _client(self, role: str, *extra: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "benchmarks.chaos.producer",
            role,
            "--store",
            self.store.client_url,
            "--ledger",
            self.ledger,
            "--seed",
            str(self.args.seed),
            *extra,
        ]

    def start_producer(self, until: float) -> None:
        self.generation += 1
        rate = self.args.jobs / self.args.duration
        self.producer = self._spawn(
            f"producer-{self.generation}",
            self._client(
                "producer",
                "--generation",
                str(self.generation),
                "--rate",
                f"{rate:g}",
                "--until",
                f"{until:.3f}",
            ),
        )

    def start_canceller(self) -> None:
        self.canceller = self._spawn("canceller", self._client("canceller"))

    def start_forker(self) -> subprocess.Popen[bytes]:
        """A producer that forks after opening its client (in a session of its
        own: a child it could not stop is ended with it)."""
        self.generation += 1
        proc = self._spawn(
            f"forker-{self.generation}",
            self._client("forker", "--generation", str(self.generation), "--batch", "5"),
            session=True,
        )
        self.forkers.append(proc)
        return proc

    def wait_forkers(self, timeout: float) -> None:
        """Let the forking producers finish (each waits for its child, within bounds)."""
        give_up = time.monotonic() + timeout
        for proc in self.forkers:
            try:
                proc.wait(max(0.0, give_up - time.monotonic()))
            except subprocess.TimeoutExpired:
                return

    # ── the end ─────────────────────────────────────────────────────
    def stop_all(self, timeout: float = 60.0) -> None:
        """SIGTERM everything, note when each worker exited, kill what is left
        after `timeout` seconds (a worker then is ``unstoppable``)."""
        clients = [p for p in (self.producer, self.canceller, *self.forkers) if p is not None]
        for proc in self.workers:
            self.stop(proc)
        for proc in clients:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        give_up = time.monotonic() + timeout
        waiting = [p for p in (*self.workers, *clients) if p.poll() is None]
        while waiting and time.monotonic() < give_up:
            time.sleep(0.05)
            waiting = [p for p in waiting if p.poll() is None]
            self.poll_ends()
        for proc in waiting:
            if proc.pid in self.life:
                self.life[proc.pid]["how"] = "unstoppable"
            proc.kill()
            proc.wait()
            if proc.pid in self.life:
                self.life[proc.pid]["end"] = time.time()
        for proc in self.forkers:  # and whatever a forker left behind
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        self.poll_ends()

    def records(self) -> list[dict[str, Any]]:
        """One ``process`` ledger record per worker."""
        return [
            {
                "e": "process",
                "victim": pid,
                "start": life["start"],
                "end": life["end"],
                "how": life["how"] or "running",
                "stop_requested": life.get("stop_requested"),
                "old": pid in self.old,
            }
            for pid, life in self.life.items()
        ]

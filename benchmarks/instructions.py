"""Instructions per job, counted by callgrind: figures a busy machine cannot move.

    python -m benchmarks.instructions [--jobs 20000] [--process-jobs 500]
                                      [--case NAME ...] [--baseline DIR]

Wall time on a shared machine moves by tens of percent from run to run; the
number of instructions the CPU retires for the same work does not. Each case
runs in a child process under ``valgrind --tool=callgrind``, once with
``--jobs`` jobs and once with twice as many; the difference of the two totals,
divided by ``--jobs``, is what one job costs, with the interpreter's start-up,
the imports and the warm-up (the same in both runs) subtracted out. Beside it:
the share of those instructions spent in CPython's cyclic garbage collector
(``gc_collect_main``, when the interpreter has its symbols).

The cases (`CASES`):

* ``submit``: job construction + `JobScheduler.submit` of the benchmark's
  no-op job (``NoopAsync("noop")``), on a scheduler that is not started;
* ``reference``: the same with a job defined the reference design's way
  (`ReferenceJob`: no ``__slots__``, an ``__init__`` that calls
  ``super().__init__`` with a name built from its arguments);
* ``run``: construction + submit + dispatch + run of the no-op job on a
  started scheduler with 8 workers (the dispatch + run share is this case
  less ``submit``);
* ``raw-submit`` and ``raw-run``: the baselines of the timed rows, building
  the same jobs and pushing them on a heap and into a dict, or draining a
  deque of them with 8 coroutines awaiting ``job.run()``;
* ``process`` and ``raw-process``: tiny jobs (``return 1``) on the process
  executor, and through raw ``loop.run_in_executor`` on a process pool of the
  same size (``--process-jobs``, as a process job costs ~30 times an async
  one); the pool's processes are counted too (each writes its own counts).

Instruction counts are not time: the collector's walk of a large heap is
bound by memory, not instructions, so its share of the time is larger than
its share of the instructions (the timed rows of ``python -m benchmarks``
say how much time it takes). A difference of a few percent in the other
instructions is a real change in the code's work, on any machine load.
Compare counts made by one version of this harness: what the child imports
moves CPython's method cache collisions, and so, by a few percent, the cost
of a code path full of generic attribute lookups.

``--baseline DIR`` (DIR a checkout of another jobsched, say ``git archive
main | tar -x -C /tmp/main``) counts every case with DIR's code too (its
source roots first on the children's ``PYTHONPATH``), for side-by-side
figures. Without valgrind this says so in one line and exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from heapq import heappush
from pathlib import Path
from typing import Any

from jobsched import AsyncJob, CpuBoundJob, JobScheduler

ROOT = Path(__file__).resolve().parent.parent
ROOTS = ("core", "plugins", "contrib_jobs")  # the source roots of a checkout
WORKERS = 8
DEFAULT_JOBS = 20_000
#: The collector's entry point in CPython 3.10 to 3.13 (gcmodule.c / gc.c).
GC_FUNCTION = "gc_collect_main"


# ── The jobs ──────────────────────────────────────────────────────────
class NoopAsync(AsyncJob):
    """Does nothing on the event loop (the suite's job)."""

    __slots__ = ()

    async def run(self) -> None:
        return None


class TinyProcess(CpuBoundJob):
    """Returns a small int from a pool process (the suite's process job)."""

    __slots__ = ()

    def run_sync(self) -> int:
        return 1


class ReferenceJob(AsyncJob):
    """A job written as the reference design's examples are (its ``EmailJob``):
    no ``__slots__``, its own attributes, a name built in ``__init__``."""

    def __init__(self, to: str, subject: str, latency: float = 0.05, **kw: Any) -> None:
        super().__init__(f"email {to}: {subject}", **kw)
        self.to = to
        self.latency = latency

    async def run(self) -> None:
        return None


# ── The cases, as a child process runs them ───────────────────────────
# Each returns what it built, which the child keeps until it exits without
# tearing down (freeing the jobs at exit is no part of a job's path).
def _submit(n: int) -> object:
    scheduler = JobScheduler(num_workers=WORKERS)
    submit = scheduler.submit
    for _ in range(n):
        submit(NoopAsync("noop"))
    return scheduler


def _reference(n: int) -> object:
    scheduler = JobScheduler(num_workers=WORKERS)
    submit = scheduler.submit
    for _ in range(n):
        submit(ReferenceJob("ops@example.com", "daily report"))
    return scheduler


def _run(n: int) -> object:
    async def main() -> JobScheduler:
        scheduler = JobScheduler(num_workers=WORKERS)
        submit = scheduler.submit
        for _ in range(n):
            submit(NoopAsync("noop"))
        await scheduler.start()
        await scheduler.join()
        await scheduler.stop()
        return scheduler

    return asyncio.run(main())


def _raw_submit(n: int) -> object:
    heap: list[tuple[int, int, NoopAsync]] = []
    index: dict[str, NoopAsync] = {}
    for seq in range(n):
        job = NoopAsync("noop")
        index[job.job_id] = job
        heappush(heap, (-job.priority, seq, job))
    return heap, index


def _raw_run(n: int) -> object:
    async def main() -> None:
        queue = deque(NoopAsync("noop") for _ in range(n))

        async def worker() -> None:
            pop = queue.popleft
            while queue:
                await pop().run()

        await asyncio.gather(*(worker() for _ in range(WORKERS)))

    return asyncio.run(main())


def _pool_size() -> int:
    # The process executor's pool for WORKERS workers (one process per core at most).
    return max(1, min(WORKERS, os.cpu_count() or 1))


def _wait_for_pool_processes() -> None:
    # Each pool process writes its own counts when it exits: wait for that.
    for process in multiprocessing.active_children():
        process.join()


def _process(n: int) -> object:
    async def main() -> JobScheduler:
        scheduler = JobScheduler(num_workers=WORKERS)
        await scheduler.start()
        submit = scheduler.submit
        for _ in range(n):
            submit(TinyProcess("tiny"))
        await scheduler.join()
        await scheduler.stop()
        return scheduler

    scheduler = asyncio.run(main())
    _wait_for_pool_processes()
    return scheduler


def _raw_process(n: int) -> object:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        queue = deque(TinyProcess("tiny") for _ in range(n))
        with ProcessPoolExecutor(_pool_size()) as pool:

            async def worker() -> None:
                while queue:
                    await loop.run_in_executor(pool, queue.popleft().run_sync)

            await asyncio.gather(*(worker() for _ in range(WORKERS)))

    asyncio.run(main())
    _wait_for_pool_processes()
    return None


@dataclass(frozen=True)
class Case:
    name: str
    what: str  # the row's name
    run: Callable[[int], object]


CASES = {
    case.name: case
    for case in (
        Case("submit", "job construction + submit (`NoopAsync`), not running", _submit),
        Case(
            "reference",
            "job construction + submit (a reference-style `AsyncJob` subclass), not running",
            _reference,
        ),
        Case("run", "job construction + submit + dispatch + run (`NoopAsync`)", _run),
        Case("raw-submit", "construction + heappush + dict insert (raw baseline)", _raw_submit),
        Case("raw-run", "raw asyncio draining a deque, construction included", _raw_run),
        Case("process", "tiny process jobs, submit + run, every process counted", _process),
        Case("raw-process", "raw `run_in_executor` on a process pool (baseline)", _raw_process),
    )
}


def child(case: str, n: int) -> None:
    """Warm up (the same in every run), then run `case` with `n` jobs."""
    run = CASES[case].run
    held = [run(200)]  # first use: imports, plugin composition, caches
    gc.collect()
    held.append(run(n))
    sys.stdout.flush()
    # No interpreter teardown: freeing what the runs built is no part of a job's path.
    os._exit(0)


# ── Counting ──────────────────────────────────────────────────────────
@dataclass(frozen=True)
class Count:
    total: int  # instructions, the child process and the processes it forked
    gc: int | None  # of which in the child's cyclic collector (None: no symbols)


def valgrind_missing() -> str | None:
    """Why callgrind cannot run here (one line), or None."""
    for tool in ("valgrind", "callgrind_annotate"):
        if shutil.which(tool) is None:
            return (
                f"{tool} is not installed: instruction counts need valgrind "
                "(Debian/Ubuntu: apt-get install valgrind)"
            )
    return None


def count(case: str, n: int, code: Path = ROOT) -> Count:
    """Instructions of a child process that runs `case` with `n` jobs, importing
    the jobsched of checkout `code`."""
    path = [str(code / root) for root in ROOTS]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([*path, os.environ.get("PYTHONPATH", "")]),
        "PYTHONHASHSEED": "0",  # set and dict orders, and so the work, the same every run
    }
    with tempfile.TemporaryDirectory(prefix="jobsched-callgrind-") as tmp:
        args = [
            "valgrind",
            "--tool=callgrind",
            # One file per process: a process job's pool processes count too.
            f"--callgrind-out-file={tmp}/callgrind.out.%p",
            sys.executable,
            "-m",
            "benchmarks.instructions",
            "--child",
            case,
            str(n),
        ]
        child = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        _, stderr = child.communicate()
        main = Path(tmp) / f"callgrind.out.{child.pid}"  # valgrind runs it in its own pid
        if child.returncode != 0 or not main.exists():
            raise RuntimeError(f"callgrind run of {case!r} failed:\n{stderr[-3000:]}")
        total = sum(_total(out) for out in Path(tmp).glob("callgrind.out.*"))
        return Count(total, _inclusive(main, GC_FUNCTION))


def _total(out: Path) -> int:
    with out.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError(f"{out}: no summary line")


def _inclusive(out: Path, function: str) -> int | None:
    annotated = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(out)],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    pattern = re.compile(rf"^\s*([\d,]+)\s.*[:\s]{re.escape(function)}\s")
    for line in annotated.splitlines():
        match = pattern.match(line)
        if match:
            return int(match.group(1).replace(",", ""))
    return None  # no symbols for it: the interpreter was stripped


@dataclass(frozen=True)
class PerJob:
    """Instructions one job costs in a case: ``(count(2n) - count(n)) / n``."""

    case: str
    total: float
    gc: float | None

    @property
    def other(self) -> float | None:
        return None if self.gc is None else self.total - self.gc


def per_job(case: str, n: int, code: Path = ROOT) -> PerJob:
    one, two = count(case, n, code), count(case, 2 * n, code)
    gc_share = None if one.gc is None or two.gc is None else (two.gc - one.gc) / n
    return PerJob(case, (two.total - one.total) / n, gc_share)


def describe(figure: PerJob) -> str:
    text = f"{figure.total:,.0f} instr/job"
    if figure.gc is not None:
        text += f" (GC {figure.gc:,.0f})"
    return text


#: The process cases' N (``--process-jobs``): a process job costs ~30 times an async one.
DEFAULT_PROCESS_JOBS = 500


def rows(n: int, process_n: int) -> list[tuple[str, str, str, str]]:
    """``(row name, jobsched, baseline, versus)`` for ``python -m benchmarks
    --callgrind``: instructions per job of every case, beside its baseline."""
    f = {case: per_job(case, process_n if "process" in case else n) for case in CASES}

    def versus(ours: PerJob, base: PerJob) -> str:
        text = f"{ours.total / base.total:.2f}x"
        if ours.other is not None and base.other is not None:
            text += f" ({ours.other / base.other:.2f}x without GC)"
        return text

    submit_base = f"{describe(f['raw-submit'])} (construction + heappush + dict insert)"
    dispatch = f["run"].total - f["submit"].total
    return [
        (
            f"instructions per job: {CASES['submit'].what} (N = {n:,})",
            describe(f["submit"]),
            submit_base,
            versus(f["submit"], f["raw-submit"]),
        ),
        (
            f"instructions per job: {CASES['reference'].what} (N = {n:,})",
            describe(f["reference"]),
            submit_base,
            versus(f["reference"], f["raw-submit"]),
        ),
        (
            f"instructions per job: {CASES['run'].what} (N = {n:,})",
            f"{describe(f['run'])}; dispatch + run {dispatch:,.0f}",
            f"{describe(f['raw-run'])} (raw asyncio, deque, jobs built)",
            versus(f["run"], f["raw-run"]),
        ),
        (
            f"instructions per job: {CASES['process'].what} (N = {process_n:,})",
            describe(f["process"]),
            describe(f["raw-process"]) + " (raw `run_in_executor`, pool of the same size)",
            versus(f["process"], f["raw-process"]),
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.instructions",
        description="Instructions per job on the in-memory path, counted by valgrind's "
        "callgrind (the difference of runs with N and 2N jobs, over N).",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=DEFAULT_JOBS,
        help="N of the in-memory cases (default %(default)s)",
    )
    parser.add_argument(
        "--process-jobs",
        type=int,
        default=DEFAULT_PROCESS_JOBS,
        help="N of the process cases (default %(default)s)",
    )
    parser.add_argument(
        "--case",
        action="append",
        choices=tuple(CASES),
        help="a case to count (repeat; default: all)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a checkout of another jobsched: count its code too, side by side",
    )
    parser.add_argument("--child", nargs=2, metavar=("CASE", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]))
        return 0
    if args.jobs < 1 or args.process_jobs < 1:
        parser.error(
            f"--jobs and --process-jobs must be at least 1, got {args.jobs}, {args.process_jobs}"
        )
    if args.baseline is not None:
        args.baseline = args.baseline.resolve()
        if not (args.baseline / "core" / "jobsched" / "__init__.py").is_file():
            parser.error(f"--baseline {args.baseline}: not a jobsched checkout (no core/jobsched)")
    missing = valgrind_missing()
    if missing is not None:
        print(f"python -m benchmarks.instructions: {missing}", file=sys.stderr)
        return 2
    cases = args.case or list(CASES)
    codes = [("this", ROOT)]
    if args.baseline is not None:
        codes.append(("baseline", args.baseline))
    width = max(len(c) for c in cases)
    print(
        f"instructions per job ((count(2N) - count(N)) / N; N = {args.jobs:,}, "
        f"{args.process_jobs:,} for the process cases):"
    )
    for case in cases:
        n = args.process_jobs if "process" in case else args.jobs
        for label, code in codes:
            figure = per_job(case, n, code)
            other = "" if figure.other is None else f", without GC {figure.other:,.0f}"
            print(f"  {case:<{width}}  {label:<8}  {describe(figure)}{other}", flush=True)
    return 0


if __name__ == "__main__":
    # Through the module, not as __main__: process jobs pickle by module and name.
    from benchmarks.instructions import main as _main

    raise SystemExit(_main())

"""``jobsched run FILE.toml``: run a job file to completion."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .._plugins import PluginManager
from .._status import JobStatus
from ..jobfile import JobFile, Progress, RunResult, load_jobfile, run_jobfile
from ._common import add_logging_options, configure_logging, make_console, print_json

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

EXIT_CODES = (
    "Exit codes: 0 every job completed; 1 a job failed, timed out or was cancelled; "
    "2 bad input (nothing ran); 130 interrupted."
)


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run a job file to completion",
        description="Run every job of a TOML job file (see docs/jobfile.md) to completion. "
        "On a terminal it shows live progress; at the end it prints one row per job "
        "(id, type, status, attempts, duration, result or error). The file is checked "
        "completely before anything runs.",
        epilog=EXIT_CODES,
    )
    parser.add_argument("file", metavar="FILE.toml", help="the job file")
    parser.add_argument(
        "--store",
        metavar="URL",
        help="keep every job's state in this store (e.g. sqlite:///jobs.db) so the same "
        "command run again after a crash or Ctrl-C resumes the run instead of starting a "
        "second copy (docs/durability.md); with a shared store (postgresql://...) the "
        "jobs are submitted there, `jobsched worker` processes run them and this command "
        "follows them to the end (docs/postgres.md)",
    )
    add_run_options(parser)
    parser.set_defaults(handler=run_command)


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options `run` and `demo` share."""
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the summary as JSON (docs/cli.md) instead of a table; no live progress",
    )
    add_logging_options(parser)


def run_command(args: argparse.Namespace) -> int:
    configure_logging(args.log_format, args.log_level)
    plugins = PluginManager()
    jobfile = load_jobfile(args.file, plugins=plugins)
    if args.store:
        from ._worker import is_shared, run_shared

        if is_shared(args.store, plugins):
            return run_shared(jobfile, plugins, args.store, as_json=args.json)
    return run_and_report(jobfile, plugins, as_json=args.json, store=args.store)


def run_and_report(
    jobfile: JobFile, plugins: PluginManager, *, as_json: bool, store: str | None = None
) -> int:
    """Run a loaded job file, print the summary, return the exit code."""
    console = None if as_json else make_console()
    live = console is not None and console.is_terminal
    result = asyncio.run(_run(jobfile, plugins, console if live else None, store))
    if as_json:
        print_json(result.to_json())
    else:
        assert console is not None
        print_summary(console, result)
    return result.exit_code


async def _run(
    jobfile: JobFile, plugins: PluginManager, console: Console | None, store: str | None
) -> RunResult:
    stop = asyncio.Event()
    progress = Progress()
    with _on_interrupt(stop), _live(console, progress):
        return await run_jobfile(
            jobfile, plugins=plugins, progress=progress, stop=stop, store=store
        )


@contextlib.contextmanager
def _on_interrupt(stop: asyncio.Event) -> Iterator[None]:
    # Ctrl-C ends the run cleanly: running jobs are cancelled and the summary
    # still prints (exit code 130).
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGINT, stop.set)
    except (NotImplementedError, RuntimeError):  # pragma: no cover - not on this platform
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)


@contextlib.contextmanager
def _live(console: Console | None, progress: Progress) -> Iterator[None]:
    if console is None:
        yield
        return
    from rich.live import Live

    with Live(
        _ProgressView(progress),
        console=console,
        refresh_per_second=10,
        transient=True,
        redirect_stderr=True,
        redirect_stdout=False,
    ):
        yield


class _ProgressView:
    """The live line: jobs by status and the elapsed time (rendered on rich's thread)."""

    def __init__(self, progress: Progress) -> None:
        from rich.spinner import Spinner

        self.progress = progress
        self.spinner = Spinner("dots")

    def __rich__(self) -> RenderableType:
        counts = self.progress.snapshot()
        parts = [f"{counts[s.value]} {_LABELS[s]}" for s in JobStatus if counts[s.value]]
        self.spinner.update(
            text=f"running jobs: {' · '.join(parts) or 'starting'} · "
            f"{self.progress.elapsed:.1f}s elapsed"
        )
        return self.spinner


_LABELS = {
    JobStatus.PENDING: "pending",
    JobStatus.RUNNING: "running",
    JobStatus.RETRY_WAIT: "waiting to retry",
    JobStatus.COMPLETED: "completed",
    JobStatus.FAILED: "failed",
    JobStatus.TIMED_OUT: "timed out",
    JobStatus.CANCELLED: "cancelled",
}
_STYLES = {
    JobStatus.COMPLETED: "green",
    JobStatus.FAILED: "bold red",
    JobStatus.TIMED_OUT: "yellow",
    JobStatus.CANCELLED: "dim",
}


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    return f"{seconds:.2f}s"


def print_summary(console: Console, result: RunResult) -> None:
    """The final table: one row per job, then the totals."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, show_edge=False)
    for column in ("ID", "TYPE", "STATUS", "ATTEMPTS", "DURATION", "RESULT / ERROR"):
        justify = "right" if column in ("ATTEMPTS", "DURATION") else "left"
        table.add_column(column, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for outcome in result.outcomes:
        detail = outcome.result if outcome.status is JobStatus.COMPLETED else outcome.error
        table.add_row(
            outcome.id,
            outcome.type,
            Text(outcome.status.value, style=_STYLES.get(outcome.status, "")),
            str(outcome.attempts),
            _duration(outcome.duration),
            Text("-" if detail is None else str(detail)),
        )
    if result.outcomes:
        console.print(table)
    counts = result.counts()
    done = ", ".join(f"{counts[s.value]} {_LABELS[s]}" for s in JobStatus if counts[s.value])
    total = len(result.outcomes)
    line = (
        f"{total} job{'s' if total != 1 else ''} in {result.elapsed:.2f}s"
        f"{': ' + done if done else ''} · peak {result.peak_running} running "
        f"({result.workers} workers, {result.strategy} strategy)"
    )
    if result.interrupted:
        line = f"interrupted: {line}"
    console.print(line, markup=False)

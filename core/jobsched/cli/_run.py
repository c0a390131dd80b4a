"""``jobsched run FILE.toml``: run a job file to completion."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .. import JobStatus, PluginManager
from ..jobfile import (
    INTERRUPTED,
    JobFile,
    JobOutcome,
    Progress,
    RunResult,
    load_jobfile,
    run_jobfile,
)
from ._common import (
    add_import_option,
    add_logging_options,
    configure_logging,
    make_console,
    print_json,
)
from ._metrics import add_metrics_options, start_metrics

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

EXIT_CODES = (
    "Exit codes: 0 every job completed; 1 a job failed, timed out or was cancelled; "
    "2 bad input (nothing ran); 130 interrupted (Ctrl-C or SIGTERM)."
)
#: Past this many jobs the summary table shows only the jobs that did not
#: complete (the counts cover the rest): drawing 50,000 rows takes ~20 s.
#: `--all` shows every row.
FULL_TABLE_LIMIT = 200


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run a job file to completion",
        description="Run every job of a TOML job file (see docs/jobfile.md) to completion. "
        "On a terminal it shows live progress; at the end it prints one row per job "
        "(id, type, status, attempts, start order, duration, result or error; past "
        f"{FULL_TABLE_LIMIT} jobs only those that did not complete, unless --all). The "
        "file is checked completely before anything runs. Ctrl-C or SIGTERM stops the "
        "run and still prints the summary.",
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
    add_import_option(parser)
    add_run_options(parser)
    add_metrics_options(parser)
    parser.set_defaults(handler=run_command)


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options `run` and `demo` share."""
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the summary as JSON (docs/cli.md) instead of a table; no live progress",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        dest="all_rows",
        help=f"list every job in the summary table (past {FULL_TABLE_LIMIT} jobs it lists "
        "only those that did not complete)",
    )
    add_logging_options(parser)


def run_command(args: argparse.Namespace, plugins: PluginManager) -> int:
    configure_logging(args.log_format, args.log_level)
    jobfile = load_jobfile(args.file, plugins=plugins)
    start_metrics(args, plugins)
    if args.store:
        from ._worker import is_shared, run_shared

        if is_shared(args.store, plugins):
            return run_shared(
                jobfile, plugins, args.store, as_json=args.json, all_rows=args.all_rows
            )
    return run_and_report(
        jobfile, plugins, as_json=args.json, all_rows=args.all_rows, store=args.store
    )


def run_and_report(
    jobfile: JobFile,
    plugins: PluginManager,
    *,
    as_json: bool,
    all_rows: bool = False,
    store: str | None = None,
) -> int:
    """Run a loaded job file, print the summary, return the exit code."""
    console = None if as_json else make_console()
    live = console is not None and console.is_terminal
    result = asyncio.run(_run(jobfile, plugins, console if live else None, store))
    if as_json:
        print_json(result.to_json())
    else:
        assert console is not None
        print_summary(console, result, all_rows=all_rows)
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


#: The signals that stop a run cleanly: Ctrl-C, and what a service manager
#: (systemd, docker stop, kill) sends.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def _on_interrupt(stop: asyncio.Event) -> Iterator[None]:
    # Ctrl-C or SIGTERM ends the run cleanly: running jobs are cancelled (or,
    # with a store, left there to run again) and the summary still prints
    # (exit code 130).
    loop = asyncio.get_running_loop()
    installed = []
    for sig in STOP_SIGNALS:
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - not on this platform
            continue
        installed.append(sig)
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


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
        parts = [f"{counts[s.value]} {_LABELS[s.value]}" for s in JobStatus if counts[s.value]]
        self.spinner.update(
            text=f"running jobs: {' · '.join(parts) or 'starting'} · "
            f"{self.progress.elapsed:.1f}s elapsed"
        )
        return self.spinner


_LABELS = {
    JobStatus.PENDING.value: "pending",
    JobStatus.RUNNING.value: "running",
    JobStatus.RETRY_WAIT.value: "waiting to retry",
    JobStatus.COMPLETED.value: "completed",
    JobStatus.FAILED.value: "failed",
    JobStatus.TIMED_OUT.value: "timed out",
    JobStatus.CANCELLED.value: "cancelled",
    INTERRUPTED: "interrupted, will run again",
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


def print_summary(console: Console, result: RunResult, *, all_rows: bool = False) -> None:
    """The final table, then the totals.

    One row per job; past `FULL_TABLE_LIMIT` jobs (unless `all_rows`) only
    the jobs that did not complete: the totals line counts every job.
    """
    from rich import box
    from rich.table import Table
    from rich.text import Text

    outcomes = result.outcomes
    shown = outcomes
    if not all_rows and len(outcomes) > FULL_TABLE_LIMIT:
        shown = [o for o in outcomes if o.status is not JobStatus.COMPLETED or o.will_run_again]
    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, show_edge=False)
    for column in ("ID", "TYPE", "STATUS", "ATTEMPTS", "STARTED", "DURATION", "RESULT / ERROR"):
        justify = "right" if column in ("ATTEMPTS", "STARTED", "DURATION") else "left"
        table.add_column(column, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for outcome in shown:
        if outcome.will_run_again:
            detail: Any = "will run again: the store keeps it for the next run"
        elif outcome.status is JobStatus.COMPLETED:
            detail = outcome.result
        else:
            detail = outcome.error
        table.add_row(
            outcome.id,
            outcome.type,
            Text(outcome.shown_status, style=_style(outcome)),
            str(outcome.attempts),
            "-" if outcome.start_order is None else f"#{outcome.start_order}",
            _duration(outcome.duration),
            Text("-" if detail is None else str(detail)),
        )
    if shown:
        console.print(table)
    if len(shown) < len(outcomes):
        hidden = len(outcomes) - len(shown)
        console.print(
            f"({hidden} completed job{'s' if hidden != 1 else ''} not listed: "
            f"{len(outcomes)} jobs are more than {FULL_TABLE_LIMIT}; --all lists every job)",
            markup=False,
        )
    counts = result.counts()
    done = ", ".join(f"{counts[status]} {_LABELS[status]}" for status in counts if counts[status])
    total = len(outcomes)
    line = f"{total} job{'s' if total != 1 else ''} in {result.elapsed:.2f}s"
    if done:
        line += f": {done}"
    if result.peak_running is not None:
        line += (
            f" · peak {result.peak_running} running "
            f"({result.workers} workers, {result.strategy} strategy)"
        )
    else:
        line += " · run by `jobsched worker` processes"
    if result.interrupted:
        line = f"interrupted: {line}"
    console.print(line, markup=False)


def _style(outcome: JobOutcome) -> str:
    if outcome.will_run_again:
        return "yellow"
    return _STYLES.get(outcome.status, "")

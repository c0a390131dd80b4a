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
    JobFile,
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
from ._summary import FULL_TABLE_LIMIT, LABELS, print_summary

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

EXIT_CODES = (
    "Exit codes: 0 every job completed; 1 a job failed, timed out or was cancelled; "
    "2 bad input (nothing ran); 130 interrupted (Ctrl-C or SIGTERM)."
)


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
        parts = [f"{counts[s.value]} {LABELS[s.value]}" for s in JobStatus if counts[s.value]]
        self.spinner.update(
            text=f"running jobs: {' · '.join(parts) or 'starting'} · "
            f"{self.progress.elapsed:.1f}s elapsed"
        )
        return self.spinner

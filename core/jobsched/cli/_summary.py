"""The summary a run prints: one row per job, then the totals (every store, shared too)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import JobStatus
from ..jobfile import INTERRUPTED, JobOutcome, RunResult

if TYPE_CHECKING:
    from rich.console import Console

#: Past this many jobs the summary table shows only the jobs that did not
#: complete (the counts cover the rest): drawing 50,000 rows takes ~20 s.
#: `--all` shows every row.
FULL_TABLE_LIMIT = 200

#: How the live line and the totals name each status.
LABELS = {
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
    done = ", ".join(f"{counts[status]} {LABELS[status]}" for status in counts if counts[status])
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

"""The chaos soak (benchmarks/chaos, docs/reliability.md): its checker on
hand-made ledgers, one per violation kind, and a tiny soak through its
console entry on each shared store."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from benchmarks.chaos import ledger
from benchmarks.chaos.check import Fault, check
from benchmarks.chaos.faults import FAULTS, INFRA, BadFaults, parse_faults

ROOT = Path(__file__).resolve().parents[1]
W1, W2 = 101, 102  # worker pids


def run(job: str, pid: int, start: float, end: float | None, outcome: str = "end") -> list[Any]:
    """Ledger records of one attempt: a start, and its end or failure unless cut short."""
    base = {"job": job, "pid": pid, "attempt": 1, "role": "worker"}
    records = [{**base, "e": "start", "t": start}]
    if end is not None:
        records.append({**base, "e": outcome, "t": end})
    return records


def submitted(ids: list[str], **extra: Any) -> dict[str, Any]:
    return {"e": "submitted", "t": 0.0, "pid": 1, "role": "producer", "ids": ids, **extra}


def row(job_id: str, status: str = "completed", **extra: Any) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "status": status,
        "key": None,
        "unique_key": None,
        "schedule_id": None,
        "scheduled_for": None,
        **extra,
    }


def kinds(report: Any) -> list[str]:
    return [kind for kind, _ in report.violations]


def test_a_clean_ledger_passes_with_its_figures() -> None:
    records = [
        submitted(["a", "b"], deps={"b": ["a"]}),
        *run("a", W1, 1.0, 2.0),
        *run("b", W2, 2.5, 3.0),
    ]
    report = check(records, [row("a"), row("b")], [])
    assert report.ok, report.violations
    assert (report.jobs, report.submitted, report.runs) == (2, 2, 2)


def test_lost_jobs_are_reported() -> None:
    records = [submitted(["a", "gone"]), *run("a", W1, 1.0, None)]
    report = check(records, [row("a")], [])
    assert kinds(report) == ["lost", "lost"]
    details = " ".join(d for _, d in report.violations)
    assert "a is completed but its body never ran to the end" in details
    assert "gone was acknowledged but is not stored" in details


def test_a_job_not_terminal_is_reported() -> None:
    report = check([*run("a", W1, 1.0, None)], [row("a", "running")], [])
    assert kinds(report) == ["not terminal"]


def test_a_job_completed_twice_without_a_fault_is_reported_and_with_one_is_not() -> None:
    records = [*run("a", W1, 1.0, 2.0), *run("a", W2, 3.0, 4.0)]
    report = check(records, [row("a")], [])
    assert kinds(report) == ["doubled"]
    # W1 was killed after its run ended, before its result was written.
    killed = [Fault("kill9", W1, 2.5, 2.5)]
    report = check(records, [row("a")], killed)
    assert report.ok and report.doubled_after_faults == 1
    # A fault on the *other* process does not explain it.
    assert kinds(check(records, [row("a")], [Fault("kill9", W2, 2.5, 2.5)])) == ["doubled"]


def test_the_zombie_lease_run_is_reported() -> None:
    """Issue 15's case: W1 paused mid-run, W2 completed the job, W1 ran it again."""
    paused = [Fault("stop", W1, 1.5, 8.0)]
    records = [*run("a", W1, 1.0, None), *run("a", W2, 4.0, 5.0), *run("a", W1, 9.0, 10.0)]
    report = check(records, [row("a")], paused)
    assert kinds(report) == ["doubled"] and report.reruns_after_faults == 1
    # Started again after it completed, even if stopped before its end.
    records = [*run("a", W1, 1.0, None), *run("a", W2, 4.0, 5.0), *run("a", W1, 9.0, None)]
    assert kinds(check(records, [row("a")], paused)) == ["rerun"]


def test_a_rerun_without_a_fault_is_reported_and_a_retry_is_not() -> None:
    cut_short = [*run("a", W1, 1.0, None), *run("a", W2, 3.0, 4.0)]
    assert kinds(check(cut_short, [row("a")], [])) == ["rerun"]
    retried = [*run("a", W1, 1.0, 1.5, "fail"), *run("a", W2, 3.0, 4.0)]
    report = check(retried, [row("a")], [])
    assert report.ok and report.retries == 1


def test_dependency_order_violations_are_reported() -> None:
    early = [
        submitted(["a", "b"], deps={"b": ["a"]}),
        *run("a", W1, 1.0, 3.0),
        *run("b", W2, 2.0, 2.5),  # started before a ran to the end
    ]
    assert kinds(check(early, [row("a"), row("b")], [])) == ["order"]
    cascade = [submitted(["a", "b"], deps={"b": ["a"]}), *run("a", W1, 1.0, 1.5, "fail")]
    assert check(cascade, [row("a", "failed"), row("b", "cancelled")], []).ok
    not_cancelled = check(cascade, [row("a", "failed"), row("b", "failed")], [])
    assert kinds(not_cancelled) == ["order"]
    ran_anyway = [*cascade, *run("b", W2, 2.0, 2.5)]
    assert kinds(check(ran_anyway, [row("a", "failed"), row("b")], [])) == ["order"]


def test_a_schedule_period_fired_twice_or_off_grid_is_reported() -> None:
    rows = [
        row(f"t{i}", schedule_id="s", scheduled_for=period)
        for i, period in enumerate([100.0, 101.0, 101.0, 102.5])
    ]
    records = [r for i in range(4) for r in run(f"t{i}", W1, 200.0 + i, 200.5 + i)]
    report = check(records, rows, [], interval=1.0)
    assert kinds(report) == ["schedule", "schedule"]
    details = " ".join(d for _, d in report.violations)
    assert "period 101.000 fired 2 times" in details and "102.500 is off its grid" in details


def test_a_unique_key_doubled_is_reported_unless_a_fault_explains_it() -> None:
    records = [
        submitted(["a", "b"], unique={"a": "u1", "b": "u1"}),
        *run("a", W1, 1.0, 3.0),
        *run("b", W2, 2.0, 4.0),
    ]
    rows = [row("a", unique_key="u1"), row("b", unique_key="u1")]
    assert kinds(check(records, rows, [])) == ["unique"]
    # W1 was paused during its run (a zombie of a, which b's submit was right to follow).
    assert check(records, rows, [Fault("stop", W1, 1.5, 2.8)]).ok
    one_after_the_other = [*records[:2], *run("a", W1, 1.0, 2.0)[1:], *run("b", W2, 2.0, 4.0)]
    assert check(one_after_the_other, rows, []).ok


def test_a_batch_stored_in_part_is_reported() -> None:
    intent = {"e": "intent", "t": 0.0, "pid": 1, "role": "producer", "batch": "b0"}
    records = [{**intent, "keys": ["k1", "k2"]}]
    report = check(records, [row("x", "cancelled", key="k1")], [])
    assert kinds(report) == ["partial batch"]
    assert check(records, [], []).ok  # none of it: the producer died before the commit


def test_the_ledger_skips_a_line_cut_short(tmp_path: Path) -> None:
    ledger.append(str(tmp_path), "worker", {"e": "start", "job": "a", "attempt": 1})
    with (next(tmp_path.glob("worker-*.jsonl"))).open("a") as f:
        f.write('{"e": "end", "jo')  # the process was killed mid-write
    records, torn = ledger.read(tmp_path)
    assert [r["e"] for r in records] == ["start"] and torn == 1


def soak_record(e: str, **fields: Any) -> dict[str, Any]:
    return {"e": e, "t": 0.0, "pid": 1, "role": "soak", **fields}


def job_fault(kind: str, job: str | None = None, victim: int | None = None) -> dict[str, Any]:
    return soak_record("jobfault", kind=kind, job=job, victim=victim, t0=1.0, t1=1.0)


def process(pid: int, start: float, end: float, how: str, **extra: Any) -> dict[str, Any]:
    return soak_record("process", victim=pid, start=start, end=end, how=how, **extra)


def beats(pid: int, *times: float) -> list[dict[str, Any]]:
    return [{"e": "alive", "t": t, "pid": pid, "role": "alive"} for t in times]


def test_a_job_failed_without_running_its_last_attempt_is_reported() -> None:
    # b's second attempt was claimed by a worker that could not build it.
    records = [*run("a", W1, 1.0, 2.0), *run("b", W1, 1.0, 1.5, "fail")]
    cannot = "cannot build job: unknown argument 'fault'"
    rows = [
        row("a", "failed", attempts=1),
        row("b", "failed", attempts=2, last_error=cannot),
        row("c", "timed_out", attempts=1),
    ]
    report = check(records, rows, [])
    assert kinds(report) == ["unrun", "unrun"]
    details = " ".join(d for _, d in report.violations)
    assert f"b is failed but never ran its attempt 2: {cannot}" in details
    assert "c is timed_out but never ran its attempt 1" in details
    # A job its workers kept dying on, a tampered row and a cascade are not.
    excused = [
        row("d", "failed", attempts=3, last_error="lease expired 3 times"),
        row("e", "failed", attempts=1, last_error="cannot build job: args"),
    ]
    assert check([job_fault("tampered", "e")], excused, []).ok


def test_a_poison_job_must_end_failed_within_the_lease_expiry_bound() -> None:
    # It froze three workers in turn; each watchdog ended its process.
    spun = [r for pid, t in ((W1, 1.0), (W2, 5.0), (103, 9.0)) for r in run("p", pid, t, None)]
    records = [job_fault("spin", "p"), *spun]
    exits = [Fault("exited", W1, 3.0, 3.0), Fault("exited", W2, 7.0, 7.0)]
    ended = check(records, [row("p", "failed")], exits, lease_expiry_bound=3)
    assert ended.ok and ended.reruns_after_faults == 2
    too_many = check(records, [row("p", "failed")], exits, lease_expiry_bound=2)
    assert kinds(too_many) == ["poison"]
    assert kinds(check(records, [row("p", "running")], exits)) == ["not terminal", "poison"]
    # Frozen workers that nothing ended: the runs after the first are unexplained.
    assert kinds(check(records, [row("p", "failed")], [])) == ["rerun", "rerun"]


def test_a_tampered_row_must_end_failed_and_unrun() -> None:
    assert check([job_fault("tampered", "t")], [row("t", "failed")], []).ok
    ran = [job_fault("tampered", "t"), *run("t", W1, 1.0, 2.0)]
    assert kinds(check(ran, [row("t")], [])) == ["tampered"]
    stuck = check([job_fault("tampered", "t")], [row("t", "running")], [])
    assert kinds(stuck) == ["not terminal", "tampered"]


def test_a_worker_loop_blocked_past_its_watchdog_is_reported_unless_sigstopped() -> None:
    steady = beats(W1, *(i * 0.25 for i in range(40)))
    late = beats(W2, 0.0, 0.25, 0.5, 20.0, 20.25)  # 19.5 s without a beat
    records = [*steady, *late, process(W1, 0.0, 10.0, "stopped", stop_requested=9.9)]
    report = check(records, [], [], watchdog=10.0)
    assert kinds(report) == ["blocked"] and f"worker {W2}'s loop was blocked 19.5 s" in str(
        report.violations
    )
    assert report.longest_block == pytest.approx(19.5)
    assert check(records, [], [], watchdog=20.0).ok
    # The soak had SIGSTOPped it meanwhile: not its loop's doing.
    assert check(records, [], [Fault("stop", W2, 1.0, 19.0)], watchdog=10.0).ok
    # Frozen until it was killed: from its last beat to its end.
    frozen = [*beats(W1, 0.0, 0.25), process(W1, 0.0, 30.0, "killed")]
    assert kinds(check(frozen, [], [], watchdog=10.0)) == ["blocked"]


def test_a_worker_that_does_not_stop_within_its_grace_is_reported() -> None:
    quick = process(W1, 0.0, 31.0, "stopped", stop_requested=30.0)
    slow = process(W2, 0.0, 60.0, "stopped", stop_requested=30.0)
    killed = process(103, 0.0, 91.0, "unstoppable", stop_requested=30.0)
    report = check([quick, slow, killed], [], [], grace=10.0)
    assert kinds(report) == ["shutdown", "shutdown"]
    assert "it was killed" in report.violations[1][1]


def test_a_forked_producers_child_that_could_not_submit_is_reported() -> None:
    def ended(pid: int, ok: bool, reason: str | None = None) -> dict[str, Any]:
        fields = {"ok": ok, "child": pid + 100, "reason": reason}
        return {"e": "fork_child", "t": 2.0, "pid": pid, "role": "producer", **fields}

    records = [
        *(job_fault("producer_fork", victim=pid) for pid in (7, 8, 9)),
        ended(7, True),
        ended(8, False, "its child was killed after 30 s"),
    ]
    report = check(records, [], [])
    assert kinds(report) == ["fork", "fork"]
    assert "producer 8: its child was killed after 30 s" in report.violations[0][1]
    assert "producer 9 never reported its child's end" in report.violations[1][1]


def test_job_faults_explain_no_rerun() -> None:
    """A job fault (here a fork) is no excuse: what it re-ran is a violation."""
    records = [job_fault("fork", "f", W1), *run("a", W1, 1.0, None), *run("a", W2, 3.0, 4.0)]
    assert kinds(check(records, [row("a")], [])) == ["rerun"]


def test_the_faults_option_names_faults_all_or_infra() -> None:
    assert parse_faults("all") == list(FAULTS)
    assert parse_faults("infra") == list(INFRA)
    assert parse_faults("spin, infra,print") == [*INFRA, "spin", "print"]
    with pytest.raises(BadFaults, match="unknown fault 'spn'"):
        parse_faults("infra,spn")


def soak(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.chaos", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_bad_soak_arguments_exit_2_naming_them(tmp_path: Path) -> None:
    result = soak("--store", "mysql://x", "--duration", "1", "--dir", str(tmp_path / "d"))
    assert result.returncode == 2
    assert "--store 'mysql://x': give postgresql://" in result.stderr
    result = soak("--store", "sqlite", "--workers", "0")
    assert result.returncode == 2 and "--workers must be at least 1, got 0" in result.stderr
    result = soak("--store", "sqlite", "--faults", "kill9,nope")
    assert result.returncode == 2 and "--faults: unknown fault 'nope'" in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_tiny_soak_passes_through_the_console_entry(kind: str, tmp_path: Path) -> None:
    if kind == "postgresql":
        from pg_support import base_dsn

        store = base_dsn()
    else:
        store = "sqlite"
    # A few faults, to keep it short: .ci/run soaks every fault.
    result = soak(
        "--store", store, "--workers", "2", "--jobs", "60", "--duration", "10",
        "--seed", "3", "--fault-every", "2", "--dir", str(tmp_path / "soak"),
        "--faults", "infra,print,producer_fork",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for line in [
        "lost: 0",
        "completed twice without a fault: 0",
        "dependency order violated: 0",
        "schedule periods fired twice or off grid: 0",
        "unique keys doubled: 0",
        "failed or timed out without running: 0",
        "workers not stopped within their grace: 0",
        "forked producers' children that could not submit: 0",
        "store unreadable by jobsched: 0",
        "seed 3",
    ]:
        assert line in out
    assert "faults injected: " in out and "faults injected: none" not in out
    assert "job and deployment faults injected: none" not in out
    assert re.search(r"workers blocked past the watchdog bound \(10 s\): 0 \(longest", out)
    enabled = "kill9, stop, pg_terminate" if kind == "postgresql" else "kill9, stop, producer_kill"
    assert f"faults enabled: {enabled}" in out
    assert out.rstrip().splitlines()[-2] == "OK"


def test_reliability_md_names_only_options_the_soak_has() -> None:
    from benchmarks.chaos.soak import build_parser

    text = (ROOT / "docs" / "reliability.md").read_text()
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", text))
    assert named >= {"--store", "--workers", "--jobs", "--duration", "--seed", "--dir", "--lease"}
    known = set(re.findall(r"--[a-z][a-z-]*", build_parser().format_help()))
    assert named <= known, named - known


def test_a_stall_the_worker_reported_explains_a_rerun_but_not_a_zombie_start() -> None:
    """W1 started the attempt (lease fresh), then stalled past its lease before
    the body ran; W2 took the job over. W1 logged "lease lost" for it."""
    stalled = run("a", W1, 5.0, 5.1)
    stalled[0]["started"] = 1.0  # the worker started it at 1.0; the body got to run at 5.0
    records = [*run("a", W2, 3.0, 4.0), *stalled]
    reported = [Fault("lease_lost", W1, 0.0, 5.2, job="a")]
    report = check(records, [row("a")], reported)
    assert report.ok, report.violations
    assert (report.doubled_after_faults, report.after_stalls, report.leases_lost) == (1, 2, 1)
    assert not report.faults  # not an injected fault
    # Not reported: a violation; reported for another job: still one.
    assert kinds(check(records, [row("a")], [])) == ["doubled"]
    other = [Fault("lease_lost", W1, 0.0, 5.2, job="b")]
    assert kinds(check(records, [row("a")], other)) == ["doubled"]
    # A zombie that *started* the job after W2 had (issue 15) is not excused
    # by its own "lease lost".
    zombie = [*run("a", W2, 3.0, 4.0), *run("a", W1, 5.0, 5.1)]
    assert kinds(check(zombie, [row("a")], reported)) == ["doubled"]

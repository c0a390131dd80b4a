"""Hardening of job files, limits and triggers (issue 9): bad input is refused, clearly."""

from __future__ import annotations

import os
import textwrap
from typing import Any

import pytest

from jobsched import JobScheduler, Limits, PluginManager
from jobsched.cli import main
from jobsched.jobfile import MAX_JOBFILE_BYTES, JobFileError, parse_jobfile

SLEEP = 'type = "sleep"\nargs = { name = "a", seconds = 0 }\n'
JOB = f'[[job]]\nid = "a"\n{SLEEP}'


@pytest.fixture(scope="module")
def plugins() -> PluginManager:
    return PluginManager(autoload=False)


def parse(text: str, plugins: PluginManager) -> Any:
    return parse_jobfile(textwrap.dedent(text), source="t.toml", plugins=plugins)


# ── [limits] names (defect 5) ─────────────────────────────────────────


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            'rates = { emial = "1/s" }',
            "t.toml:2: [limits]: rates: unknown job type 'emial'; did you mean 'email'?",
        ),
        (
            "executors = { proces = 1 }",
            "t.toml:2: [limits]: executors: unknown executor 'proces'; did you mean 'process'",
        ),
        (
            "job_types = { csv-exprot = 1 }",
            "t.toml:2: [limits]: job_types: unknown job type 'csv-exprot'; "
            "did you mean 'csv-export'?",
        ),
    ],
)
def test_a_typo_in_limits_is_refused_with_did_you_mean(
    plugins: PluginManager, line: str, message: str
) -> None:
    with pytest.raises(JobFileError) as info:
        parse(f"[limits]\n{line}\n\n{JOB}", plugins)
    assert message in str(info.value)


def test_a_typo_in_limits_exits_2_from_the_cli(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "jobs.toml"
    path.write_text(f'[limits]\nrates = {{ emial = "1/s" }}\n\n{JOB}')
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean 'email'?" in err


def test_registered_limit_names_are_accepted(plugins: PluginManager) -> None:
    jobfile = parse(
        f'[limits]\nexecutors = {{ process = 1 }}\njob_types = {{ sleep = 1 }}\n'
        f'rates = {{ email = "1/s" }}\n\n{JOB}',
        plugins,
    )
    assert jobfile.tables["limits"].rates


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        (
            {"executors": {"proces": 1}},
            "limits.executors['proces']: unknown executor 'proces'; did you mean 'process'",
        ),
        (
            Limits(rates={"emial": "1/s"}),
            "limits.rates['emial']: unknown job type 'emial'; did you mean 'email'?",
        ),
        (
            {"job_types": {"csv-exprot": 1}},
            "limits.job_types['csv-exprot']: unknown job type 'csv-exprot'; "
            "did you mean 'csv-export'?",
        ),
    ],
)
def test_the_api_refuses_limit_typos(limits: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        JobScheduler(limits=limits)
    assert message in str(info.value)


def test_the_api_accepts_limits_on_functions_and_classes() -> None:
    # A function job's type is its qualified name, which no registry lists.
    scheduler = JobScheduler(limits={"job_types": {"send_report": 1}, "rates": {"Mailer.send": 1}})
    assert scheduler.limiter is not None


# ── job-file size (defect 6) and files without jobs ───────────────────


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["run", *args])
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line
    return code, err


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_device_is_not_read_as_a_job_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(capsys, "/dev/zero")
    assert code == 2
    assert err == "jobsched: error: /dev/zero: not a job file but a device; give a TOML file\n"


def test_a_job_file_over_64_mib_is_refused(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "big.toml"
    with open(path, "wb") as file:
        file.truncate(MAX_JOBFILE_BYTES + 1)  # sparse: no disk space used
    assert MAX_JOBFILE_BYTES == 64 * 1024 * 1024
    code, err = run_cli(capsys, str(path))
    assert code == 2
    assert err.endswith("big.toml: the job file is larger than 64 MiB\n")


def test_a_job_file_without_jobs_exits_2_and_creates_no_store(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "empty.toml"
    path.write_text("[scheduler]\nworkers = 2\n")
    store = tmp_path / "j.db"
    code, err = run_cli(capsys, str(path), "--store", f"sqlite:///{store}")
    assert code == 2
    assert "empty.toml: no jobs in this file" in err
    assert list(tmp_path.iterdir()) == [path]  # no store, no lock file

"""docs/cli.md and docs/jobfile.md stay true to the command line and the job-file model."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from jobsched import PluginManager, PluginRecord
from jobsched.cli import build_parser
from jobsched.jobfile import TABLES, JobOutcome, RunResult, keys_of, parse_jobfile

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _subcommands(
    parser: argparse.ArgumentParser, prefix: str = ""
) -> dict[str, argparse.ArgumentParser]:
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[f"{prefix}{name}"] = sub
                found.update(_subcommands(sub, f"{prefix}{name} "))
    return found


def test_every_command_and_option_is_documented() -> None:
    text = (DOCS / "cli.md").read_text()
    commands = _subcommands(build_parser())
    assert set(commands) == {
        "run",
        "status",
        "demo",
        "jobs",
        "jobs list",
        "jobs show",
        "jobs retry",
        "jobs requeue",
        "jobs cancel",
        "jobs purge",
        "plugins",
        "plugins list",
        "schedule",
        "schedule preview",
        "schedules",
        "schedules list",
        "schedules pause",
        "schedules resume",
        "schedules trigger",
        "queue",
        "queue pause",
        "queue resume",
        "queue status",
        "queue list",
        "store",
        "store sql",
        "worker",
        "workers",
        "workers drain",
        "workers stop",
    }
    for name, parser in commands.items():
        assert f"jobsched {name}" in text, name
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert option in text, (name, option)


def test_every_json_field_is_documented() -> None:
    text = (DOCS / "cli.md").read_text()
    result = RunResult(
        source="f", strategy="fifo", workers=1, outcomes=[], elapsed=0, peak_running=0
    )
    for field in result.to_json():
        assert f"`{field}`" in text or f"`{field}`," in text, field
    outcome_fields = JobOutcome.__attrs_attrs__  # type: ignore[attr-defined]
    for field in outcome_fields:
        assert f"`jobs[].{field.name}`" in text, field.name
    record = PluginRecord(name="x", distribution=None, version=None, builtin=False, status="loaded")
    for field in record.to_json():
        assert f"`{field}`" in text, field


def test_every_job_file_key_is_documented() -> None:
    text = (DOCS / "jobfile.md").read_text()
    for table, kind in TABLES.items():
        header = f"## `[[{table}]]`" if kind.array else f"## `[{table}]`"
        assert header in text, table
        for key in keys_of(kind.cls):
            assert f"| `{key}` |" in text, (table, key)


def test_the_complete_example_is_a_valid_job_file() -> None:
    text = (DOCS / "jobfile.md").read_text()
    example = re.search(r"```toml\n(.*?)```", text, re.S)
    assert example is not None
    jobfile = parse_jobfile(example.group(1), source="example", plugins=PluginManager())
    assert [j.id for j in jobfile.jobs] == ["export", "report", "primes", "reminder"]
    assert [j.id for j in jobfile.submit_order] == ["export", "primes", "report", "reminder"]
    used = set(re.findall(r"^(\w+) =", example.group(1), re.M))
    every = {key for kind in TABLES.values() for key in keys_of(kind.cls)}
    assert every - used == set(), "the complete example should use every key"

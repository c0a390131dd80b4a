"""The JSON API fuzzed against its own OpenAPI document by schemathesis.

A real ``jobsched web`` on a SQLite file in shared mode, holding a few jobs
and a schedule, gets a bounded number of generated requests per operation
(``MAX_EXAMPLES``, derandomized: the same cases every run), once with the
token and once without. Every answer must be one the document declares
(status, content type, body schema), and never a 500. ``/api/events`` is left
out: an event stream does not end, so it is no request and answer.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import positive_data_acceptance

from jobsched import BlockingClient, Submission
from web_support import BEARER, TOKEN, Echo, plugins

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

#: Generated cases per operation and phase (the coverage phase adds its own).
MAX_EXAMPLES = 25
#: Operations whose body a JSON schema cannot fully state (a registered job
#: type, arguments fitting its fields, the cron grammar, an IANA zone): a
#: schema-valid body may be refused with 400 naming the field. Every other
#: check still applies (declared status, content type and body; no 500).
SEMANTIC = {"/api/schedules", "/api/schedules/{schedule_id}/edit"}


@pytest.fixture(scope="module")
def web_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = f"sqlite:///{tmp_path_factory.mktemp('web') / 'jobs.db'}"
    with BlockingClient(url, plugins=plugins()) as client:
        client.submit_many([Submission(Echo(f"job {i}"), delay=3600) for i in range(3)])
        client.add_schedule(Echo("tick"), every=3600, start_in=3600)
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "jobsched"), "web", "--store", url, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={"PATH": "/usr/bin:/bin", "JOBSCHED_WEB_TOKEN": TOKEN},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("jobsched web: http://"), line
        yield line.split()[2]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def operations(web_url: str) -> list[Any]:
    """The document's operations (``/api/events`` left out)."""
    document = schemathesis.openapi.from_url(web_url + "api/openapi.json")
    found = [result.ok() for result in document.get_all_operations()]
    return [op for op in found if op.path != "/api/events"]


def fuzz(operations: list[Any], headers: dict[str, str]) -> list[str]:
    """Every operation with `MAX_EXAMPLES` valid requests, and as many invalid
    ones where it takes a query; the operations (with the failing case) that broke."""
    broken = []
    for operation in operations:
        # Only query parameters can be invalid here (a path's are any string).
        modes = [GenerationMode.POSITIVE]
        if len(operation.query):
            modes.append(GenerationMode.NEGATIVE)
        for mode in modes:

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=MAX_EXAMPLES,
                derandomize=True,
                database=None,
                deadline=None,
                suppress_health_check=list(HealthCheck),
                phases=[Phase.explicit, Phase.generate],
            )
            def check(case: Any) -> None:
                excluded = [positive_data_acceptance] if case.operation.path in SEMANTIC else []
                case.call_and_validate(headers=headers, excluded_checks=excluded)

            try:
                check()
            except Exception as exc:  # the failure schemathesis reports, with the case
                broken.append(f"{operation.label} ({mode}): {exc}")
    return broken


def test_the_api_keeps_its_document_with_the_token(operations: list[Any]) -> None:
    broken = fuzz(operations, BEARER)
    assert not broken, "\n\n".join(broken)


def test_the_api_keeps_its_document_without_the_token(operations: list[Any]) -> None:
    broken = fuzz(operations, {})
    assert not broken, "\n\n".join(broken)

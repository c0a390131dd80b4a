"""A file ``jobsched run --store`` wrote, watched and operated from the console
script and the dashboard (Chromium, as tests/test_web_browser.py drives it).

``jobsched run jobs.toml --store sqlite:///jobs.db``; then ``jobsched web``
on the same file shows its jobs, and ``jobsched jobs retry ID`` (or the
dashboard's Retry) works while no owner runs, and is refused naming the
owner's host:pid while ``jobsched run`` runs on the file.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from test_cli import assert_bad_input, jobsched
from test_web_browser import (  # noqa: F401 (browser is a fixture)
    SCREENSHOTS,
    TOKEN,
    Browser,
    Process,
    browser,
    until,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

JOBS = Path(__file__).resolve().parent / "sqlite_files" / "jobs.toml"
NAP = """
[[job]]
id = "nap"
type = "sleep"
args = { name = "nap", seconds = 600.0 }
"""


@pytest.fixture
def store(tmp_path: Path) -> str:
    """The URL of a file ``jobsched run`` wrote: hello completed, dead failed,
    notify cancelled (its upstream failed), two heartbeats completed."""
    shutil.copy(JOBS, tmp_path / "jobs.toml")
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    ran = jobsched("run", "jobs.toml", "--store", url, "--json", cwd=tmp_path)
    assert ran.returncode == 1, ran.stderr  # dead failed, as it should
    return url


@pytest.fixture
def dashboard(store: str) -> Iterator[str]:
    env = {k: v for k, v in os.environ.items() if k != "JOBSCHED_WEB_TOKEN"}
    process = Process(
        ["web", "--store", store, "--port", "0", "--token", TOKEN], env, "jobsched web: http://"
    )
    try:
        line = process.wait_ready()
        yield line.split("jobsched web: ", 1)[1].split()[0].rstrip("/")
    finally:
        process.stop()


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


def job_ids(base: str) -> dict[str, str]:
    """Each job's name -> id, as the dashboard's API lists them."""
    return {job["name"]: job["job_id"] for job in get_json(base + "/api/jobs?limit=100")["jobs"]}


def owner(store: str, tmp_path: Path) -> Process:
    """``jobsched run nap.toml --store`` on the file, holding it (its job sleeps)."""
    (tmp_path / "nap.toml").write_text(NAP)
    return Process(
        ["run", str(tmp_path / "nap.toml"), "--store", store, "--json"], {**os.environ}, ""
    )


def test_a_run_file_is_watched_and_operated_through_the_console_script(
    store: str, dashboard: str, tmp_path: Path
) -> None:
    ids = job_ids(dashboard)
    assert {"hello", "dead", "notify", "heartbeat"} <= set(ids)
    dead = ids["dead"]
    assert get_json(f"{dashboard}/api/jobs/{dead}")["status"] == "failed"

    # No owner runs: the retry is written in the file, and the dashboard sees it.
    retried = jobsched("jobs", "retry", dead, "--store", store)
    assert retried.returncode == 0, retried.stderr
    assert f"retried {dead} (failed -> pending)" in retried.stdout
    assert get_json(f"{dashboard}/api/jobs/{dead}")["status"] == "pending"

    # The next run on the file picks it up (and holds the file while it runs).
    running = owner(store, tmp_path)
    try:
        until(lambda: job_ids(dashboard).get("nap") is not None, "the run's job in the file")
        nap = job_ids(dashboard)["nap"]
        until(
            lambda: get_json(f"{dashboard}/api/jobs/{dead}")["status"] == "failed",
            "the retried job to run again",
        )
        held_by = f"owned by a running jobsched process ({socket.gethostname()}:{running.proc.pid})"
        refused = jobsched("jobs", "cancel", nap, "--store", store)
        assert_bad_input(refused, held_by, "let it finish (or stop it) and try again")
        # The dashboard's API says the same, as a conflict with the stored state.
        request = urllib.request.Request(
            f"{dashboard}/api/jobs/{nap}/cancel",
            method="POST",
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(request, timeout=30)
        assert answer.value.code == 409
        assert held_by in json.load(answer.value)["error"]
    finally:
        running.stop()  # SIGTERM: the run stops, nap stays for the next one
    cancelled = jobsched("jobs", "cancel", nap, "--store", store)
    assert cancelled.returncode == 0, cancelled.stderr
    assert get_json(f"{dashboard}/api/jobs/{nap}")["status"] == "cancelled"


def test_the_dashboard_shows_and_retries_a_run_file(
    browser: Any,  # noqa: F811
    store: str,
    dashboard: str,
    tmp_path: Path,
) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    tab = Browser(page, dashboard)
    # docs/web.md shows two of them: JOBSCHED_UPDATE_SCREENSHOTS=1 takes them again.
    update = os.environ.get("JOBSCHED_UPDATE_SCREENSHOTS") == "1"
    shots = SCREENSHOTS if update else tmp_path / "screenshots"
    try:
        tab.open("/")
        tab.settled()
        text = tab.tab.inner_text("body")
        for name in ("hello", "dead", "notify", "heartbeat"):
            assert name in text, text
        tab.shoot("single-owner-overview", shots)
        dead = job_ids(dashboard)["dead"]

        tab.log_in()
        tab.open(f"/jobs/{dead}")
        tab.live()
        status = tab.tab.locator("[data-testid=job-status]")
        assert status.inner_text() == "failed"
        tab.tab.get_by_role("button", name="Retry").click()
        tab.flash_says("Retried")
        tab.tab.wait_for_function(
            "() => document.querySelector('[data-testid=job-status]').innerText === 'pending'"
        )

        # A run on the file restores the job and runs it; the page follows
        # live, and a Retry while that run holds the file names it.
        running = owner(store, tmp_path)
        try:
            tab.tab.wait_for_function(
                "() => document.querySelector('[data-testid=job-status]').innerText === 'failed'"
            )
            tab.tab.get_by_role("button", name="Retry").click()
            said = tab.flash_says("owned by a running jobsched process")
            assert f"({socket.gethostname()}:{running.proc.pid})" in said, said
            tab.shoot("single-owner-refused", shots)
        finally:
            running.stop()
        tab.tab.get_by_role("button", name="Retry").click()
        tab.flash_says("Retried")
        assert tab.dialogs == [] and tab.errors == []
    finally:
        context.close()

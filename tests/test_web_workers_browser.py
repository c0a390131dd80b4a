"""The dashboard's Workers page in Chromium, on shared SQLite and PostgreSQL.

Two real ``jobsched worker`` processes serve the store; one is SIGKILLed and
its heartbeat row moved back past its lease time (as if it had been silent
that long): the page shows the live one and the lost one, marked. A due job
of a type no worker registered is shown waiting for a worker that knows its
type, on the Workers page and on its job page. The fixtures (processes,
browser, tab) are those of tests/test_web_browser.py.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import psycopg
import pytest

import registry_jobs
import web_jobs
from jobsched import BlockingClient, JobStatus, PluginManager, build_job
from pg_support import base_dsn
from test_web_browser import (  # noqa: F401 (fixtures, used by name)
    Browser,
    Process,
    browser,
    client,
    dashboard,
    expect,
    plugin_env,
    plugins,
    screenshots,
    store_url,
    tab,
    until,
    worker,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def age(url: str, worker_id: str, seconds: float) -> None:
    """Move the worker's start and last heartbeat `seconds` back, in the store's own table."""
    if url.startswith("sqlite:"):
        path = url.removeprefix("sqlite://")
        with contextlib.closing(sqlite3.connect(path, timeout=60, isolation_level=None)) as conn:
            conn.execute(
                "UPDATE jobsched_shared_workers SET last_seen = last_seen - ?, "
                "started_at = started_at - ? WHERE worker_id = ?",
                (seconds, seconds, worker_id),
            )
        return
    schema = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["schema"][0]
    with psycopg.connect(base_dsn(), autocommit=True) as conn:
        conn.execute(
            f'UPDATE "{schema}".workers SET last_seen = last_seen - %s, '
            "started_at = started_at - %s WHERE worker_id = %s",
            [seconds, seconds, worker_id],
        )


def test_the_workers_page_shows_live_and_lost_workers_and_jobs_nobody_runs(
    store_url: str,  # noqa: F811
    plugin_env: dict[str, str],  # noqa: F811
    client: BlockingClient,  # noqa: F811
    worker: Process,  # noqa: F811
    tab: Browser,  # noqa: F811
    screenshots: Path,  # noqa: F811
) -> None:
    doomed = Process(
        ["worker", "--store", store_url, "--workers=2", "--grace=0"],
        plugin_env,
        ready="shared scheduler started",
    )
    doomed_id = doomed.wait_ready().split("process=")[1].split()[0]
    live_id = worker.ready_line.split("process=")[1].split()[0]
    doomed.proc.send_signal(signal.SIGKILL)
    doomed.stop()
    age(store_url, doomed_id, 3600 - 60)  # lost (its lease: 30 s), not yet forgotten

    # A job only a newer release knows: no running worker claims it, so it
    # stays due, and the registry says why.
    producer = BlockingClient(
        store_url, plugins=PluginManager([web_jobs, registry_jobs.ProducerTypes()])
    )
    with producer:
        newer = producer.submit(registry_jobs.Newer(n=1))

    tab.open("/workers")
    tab.live()
    rows = tab.tab.locator("tr[data-worker]")
    assert sorted(rows.evaluate_all("rs => rs.map(r => r.dataset.worker)")) == sorted(
        [live_id, doomed_id]
    )
    lost = tab.tab.locator(f'tr[data-worker="{doomed_id}"]')
    assert lost.get_attribute("data-state") == "lost"
    assert lost.get_attribute("class") == "lost"
    assert "59 min" in lost.inner_text()  # last seen
    alive = tab.tab.locator(f'tr[data-worker="{live_id}"]')
    assert alive.get_attribute("data-state") == "idle"
    assert str(worker.proc.pid) in alive.inner_text()
    assert "default\u2009\u00d7\u20094" in alive.inner_text()  # default, times sign, 4, thin spaces
    assert tab.tab.inner_text("[data-testid=count-lost] .n") == "1"
    unserved = tab.tab.inner_text("[data-testid=unserved]")
    assert "registry.newer" in unserved and "no live worker runs job type" in unserved
    # (docs/web/workers.png is shot by the drain test below: busier workers.)

    tab.open(f"/jobs/{newer}")
    note = tab.tab.inner_text("[data-testid=no-worker]")
    assert note == "no live worker runs job type registry.newer"
    tab.shoot("job-no-worker", screenshots)

    # The overview's Workers panel reads the registry too.
    tab.open("/")
    assert doomed_id in tab.tab.inner_text("body")

    with urllib.request.urlopen(tab.base + "/api/workers", timeout=30) as response:
        listed: dict[str, Any] = json.load(response)
    assert listed["registry"] is True
    assert {w["worker_id"]: w["state"] for w in listed["workers"]} == {
        live_id: "idle",
        doomed_id: "lost",
    }
    with urllib.request.urlopen(tab.base + "/api/stats", timeout=30) as response:
        assert json.load(response)["unserved"] == {"registry.newer": 1}
    assert client.get(newer).status.value == "pending"  # never claimed, never failed
    assert tab.dialogs == [] and tab.errors == []


def with_lease(url: str, seconds: float) -> str:
    return f"{url}{'&' if '?' in url else '?'}lease={seconds:g}"


def test_drain_then_stop_a_busy_worker_from_the_workers_page(
    store_url: str,  # noqa: F811
    plugin_env: dict[str, str],  # noqa: F811
    client: BlockingClient,  # noqa: F811
    plugins: PluginManager,  # noqa: F811
    tab: Browser,  # noqa: F811
    screenshots: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    # A heartbeat every second: a SQLite file's workers read requests then.
    url = with_lease(store_url, 3)
    busy = Process(
        ["worker", "--store", url, "--workers=1", "--grace=60"],
        plugin_env,
        ready="shared scheduler started",
    )
    others: list[Process] = []
    try:
        busy_id = busy.wait_ready().split("process=")[1].split()[0]
        hold = tmp_path / "hold"
        hold.touch()
        job_id = client.submit(build_job("steps", {"flag": str(hold), "steps": 3}, plugins=plugins))
        until(lambda: client.get(job_id).lease_owner == busy_id, "the busy worker runs the job")
        # Beside it: an idle worker, and a lost one (SIGKILLed, its row aged).
        idle = Process(["worker", "--store", url, "--workers=2"], plugin_env, "scheduler started")
        doomed = Process(["worker", "--store", store_url], plugin_env, "scheduler started")
        others += [idle, doomed]
        idle_id, doomed_id = (
            p.wait_ready().split("process=")[1].split()[0] for p in (idle, doomed)
        )
        doomed.proc.send_signal(signal.SIGKILL)
        doomed.stop()
        age(store_url, doomed_id, 3600 - 60)

        tab.log_in()
        tab.open("/workers")
        tab.live()
        tab.settled()
        row = tab.tab.locator(f'tr[data-worker="{busy_id}"]')
        assert row.get_attribute("data-state") == "live"
        assert tab.tab.locator(f'tr[data-worker="{doomed_id}"] button').count() == 0
        row.get_by_role("button", name="Drain").click()  # its confirm() is accepted
        tab.flash_says(f"Worker {busy_id} drains")
        until(lambda: _state(client, busy_id) == ("draining", "drain"), "the worker drains")
        tab.open("/workers")
        row = tab.tab.locator(f'tr[data-worker="{busy_id}"]')
        expect(row.locator("[data-testid=asked]")).to_have_text("drained by an operator")
        assert row.get_by_role("button", name="Drain").count() == 0
        assert tab.tab.locator(f'tr[data-worker="{idle_id}"] button').count() == 2
        tab.shoot("workers", screenshots)

        # Drained: a job submitted now waits for another worker (the idle one).
        after = client.submit(build_job("gated", {"flag": str(tmp_path / "no")}, plugins=plugins))
        assert client.wait(after, timeout=60).status is JobStatus.COMPLETED
        assert client.get(job_id).status is JobStatus.RUNNING  # still the drained one's

        row.get_by_role("button", name="Stop").click()
        tab.flash_says(f"Worker {busy_id} stops")
        until(lambda: _state(client, busy_id) == ("draining", "stop"), "the stop is asked")
        assert busy.proc.poll() is None  # warm: its job finishes first
        hold.unlink()
        assert busy.proc.wait(timeout=60) == 0
        done = client.get(job_id)
        assert (done.status, done.result) == (JobStatus.COMPLETED, 3)
        assert _state(client, busy_id) is None  # it left the registry
        tab.open("/workers")
        assert tab.tab.locator(f'tr[data-worker="{busy_id}"]').count() == 0
        assert [d.split("?")[0] for d in tab.dialogs] == [
            f"confirm: Drain worker {busy_id}",
            f"confirm: Stop worker {busy_id}",
        ]
        assert tab.errors == []
    finally:
        busy.stop()
        for process in others:
            process.stop()


def _state(reader: BlockingClient, worker_id: str) -> tuple[str, str | None] | None:
    found = [w for w in reader.workers() if w.worker_id == worker_id]
    return (found[0].state, found[0].command) if found else None

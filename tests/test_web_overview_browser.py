"""The Overview's history in Chromium, on shared SQLite and PostgreSQL.

Two real ``jobsched worker`` processes (one on the ``default`` queue, one on
``bulk``) run jobs; each folds the attempts it ends in memory and flushes
them to the store on its lease renewal (a lease of 1.5 s here: every 0.5 s).
A job waits in a queue no worker serves, so the backlog has an age. The
browser reads the history panel, then filters it by window and by queue
through its form; the JSON API answers the same. The fixtures (processes,
browser, tab) are those of tests/test_web_browser.py.
"""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import web_jobs
from jobsched import BlockingClient, JobStatus, PluginManager, build_job
from test_web_browser import (  # noqa: F401 (fixtures, used by name)
    Browser,
    Process,
    browser,
    client,
    dashboard,
    plugin_env,
    plugins,
    screenshots,
    store_url,
    tab,
    until,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def with_lease(url: str, seconds: float) -> str:
    return f"{url}{'&' if '?' in url else '?'}lease={seconds}"


def test_the_overview_shows_the_history_the_workers_flush(
    store_url: str,  # noqa: F811
    plugin_env: dict[str, str],  # noqa: F811
    client: BlockingClient,  # noqa: F811
    plugins: PluginManager,  # noqa: F811
    tab: Browser,  # noqa: F811
    screenshots: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    assert web_jobs  # the job types the workers load as a plugin

    def job(type: str, **args: Any) -> Any:
        return build_job(type, args, plugins=plugins)

    short = with_lease(store_url, 1.5)
    workers = [
        Process(
            ["worker", "--store", short, "--queue", queue, "--grace=0"],
            plugin_env,
            ready="shared scheduler started",
        )
        for queue in ("default", "bulk")
    ]
    try:
        for process in workers:
            process.wait_ready()
        closed = tmp_path / "closed"
        closed.touch()
        ok = [
            client.submit(job("gated", flag=str(tmp_path / "open"), label=f"ok {i}"))
            for i in range(6)
        ]
        bad = [
            client.submit(
                job("gated", flag=str(closed), label=f"bad {i}"),
                queue="bulk",
                retry="none",
            )
            for i in range(2)
        ]
        parked = client.submit(job("steps", flag=str(closed), steps=1), queue="parked")
        for job_id in ok:
            assert client.wait(job_id, timeout=60).status is JobStatus.COMPLETED
        for job_id in bad:
            assert client.wait(job_id, timeout=60).status is JobStatus.FAILED

        def flushed() -> bool:
            h = client.history(window="1h")
            return (h.completed, h.failed) == (6, 2)

        until(flushed, "the workers flushed their history")

        tab.open("/")
        tab.live()
        panel = tab.tab.locator("[data-testid=history]")
        assert panel.locator("[data-testid=history-completed]").inner_text() == "6"
        assert panel.locator("[data-testid=history-failed]").inner_text() == "2"
        assert panel.locator("[data-testid=history-failure-rate]").inner_text() == "25 %"
        # The job in the queue nobody serves: the backlog has an age, per queue too.
        assert panel.locator("[data-testid=backlog-age] .n").inner_text() != "—"
        parked_row = panel.locator('tr[data-queue="parked"]').inner_text()
        assert re.search(r"^parked\s+1\s+0\s+\d", parked_row), parked_row  # queued, running
        gated = panel.locator('tr[data-type="gated"]').inner_text().split("\t")
        # Job type, queued, running, backlog age, completed, failed, failure rate, p50, p95.
        assert gated[0] == "gated" and gated[4:7] == ["6", "2", "25 %"], gated
        assert gated[7].endswith(("ms", " s")) and gated[8].endswith(("ms", " s")), gated
        steps = panel.locator('tr[data-type="steps"]').inner_text().split("\t")
        assert steps[:3] == ["steps", "1", "0"], steps
        assert panel.locator("svg[data-testid=history-chart] rect.completed").count() >= 1
        tab.shoot("overview-history", screenshots)

        # A week, then the bulk queue alone: the form filters the panel in place.
        tab.tab.select_option("select[name=window]", "7d")
        tab.tab.wait_for_url(re.compile(r"window=7d"))
        expect_text(tab, "[data-testid=history] h2 .hint", "hourly buckets")
        # htmx binds the swapped-in form's triggers as it settles, a moment
        # after the swap: a choice made before then sends nothing.
        tab.tab.wait_for_function(
            "() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')"
        )
        tab.tab.select_option("select[name=queue]", "bulk")
        tab.tab.wait_for_url(re.compile(r"queue=bulk"))
        tab.tab.wait_for_function(
            "() => document.querySelector('[data-testid=history-completed]').innerText === '0'"
        )
        assert panel_figures(tab) == ("0", "2", "100 %")
        assert tab.tab.locator('tr[data-type="steps"]').count() == 0  # not in bulk
        assert tab.tab.locator("svg[data-testid=history-chart] rect.failed").count() >= 1
        tab.shoot("overview-history-filtered", screenshots)
        # The live refresh keeps the filters (they are in the address).
        tab.tab.reload()
        tab.live()
        assert panel_figures(tab) == ("0", "2", "100 %")

        query = urllib.parse.urlencode({"window": "7d", "queue": "bulk", "type": "gated"})
        with urllib.request.urlopen(f"{tab.base}/api/history?{query}", timeout=30) as response:
            found: dict[str, Any] = json.load(response)
        assert (found["step"], len(found["buckets"])) == (3600.0, 168)
        assert (found["completed"], found["failed"], found["failure_rate"]) == (0, 2, 1.0)
        assert [t["type"] for t in found["types"]] == ["gated"]
        assert client.get(parked).status is JobStatus.PENDING
        assert tab.dialogs == [] and tab.errors == []
    finally:
        for process in workers:
            process.stop()


def panel_figures(on: Browser) -> tuple[str, str, str]:
    return (
        on.tab.inner_text("[data-testid=history-completed]"),
        on.tab.inner_text("[data-testid=history-failed]"),
        on.tab.inner_text("[data-testid=history-failure-rate]"),
    )


def expect_text(on: Browser, selector: str, text: str) -> None:
    on.tab.wait_for_function(
        "([sel, text]) => (document.querySelector(sel) || {}).innerText?.includes(text)",
        arg=[selector, text],
    )

"""The dashboard's HTML pages, through httpx's ASGI transport (no browser, no server).

The app serves a SQLite file in shared mode through an open `Client`; the
jobs stay pending (no worker runs here: tests/test_web_browser.py has one).
What the browser tests cannot see cheaply is checked here: every page, its
live fragment, escaping of every job field, and the answers to bad requests.
"""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from jobsched import Client, JobScheduler, Limits, build_job
from jobsched.web import create_app

pytestmark = pytest.mark.timeout(120)

XSS = "<script>alert(1)</script>"


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    limits = Limits(executors={"async": 8}, job_types={"email": 2})
    async with Client(f"sqlite:///{tmp_path / 'jobs.db'}", limits=limits) as opened:
        yield opened


@pytest.fixture
async def http(client: Client) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(client=client, token="t0ken")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://dash") as opened:
        yield opened


def email(to: str, **options: Any) -> Any:
    return build_job("email", {"to": to, "subject": "hi", "latency": 0}, **options)


async def page(http: httpx.AsyncClient, path: str, status: int = 200, **headers: str) -> str:
    answer = await http.get(path, headers=headers)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("text/html")
    return answer.text


async def test_the_overview_counts_jobs_and_offers_the_queue_switch(
    client: Client, http: httpx.AsyncClient
) -> None:
    for i in range(3):
        await client.submit(email(f"u{i}@example.com"))
    text = await page(http, "/")
    assert '<a class="count s-pending"' in text
    assert '<div class="n">3</div>' in text
    assert 'hx-post="/api/queue/pause"' in text
    assert '<svg class="chart"' in text
    await client.pause_queue()
    text = await page(http, "/")
    assert 'hx-post="/api/queue/resume"' in text and ">paused</span>" in text


async def test_a_page_asked_by_htmx_is_only_its_live_fragment(http: httpx.AsyncClient) -> None:
    for path in ("/", "/jobs", "/schedules", "/limits"):
        full = await page(http, path)
        fragment = await page(http, path, **{"HX-Request": "true"})
        assert full.startswith("<!doctype html>")
        assert fragment.lstrip().startswith('<div id="region">'), path
        assert "<html" not in fragment


async def test_the_job_list_filters_and_pages(client: Client, http: httpx.AsyncClient) -> None:
    ids = [await client.submit(email(f"user{i}@example.com"), name=f"n{i}") for i in range(55)]
    text = await page(http, "/jobs")
    assert text.count("<tr data-job=") == 50
    assert f'data-job="{ids[-1]}"' in text and f'data-job="{ids[0]}"' not in text
    assert "1\u201350 of 55" in text and 'href="/jobs?offset=50" rel="next"' in text
    older = await page(http, "/jobs?offset=50")
    assert older.count("<tr data-job=") == 5 and "51\u201355 of 55" in older
    found = await page(http, "/jobs?q=user7%40")
    assert found.count("<tr data-job=") == 1 and f'data-job="{ids[7]}"' in found
    assert (await page(http, "/jobs?status=completed")).count("<tr data-job=") == 0
    assert "No job matches." in await page(http, "/jobs?type=nonsuch")


async def test_bad_filters_are_answered_with_one_line(http: httpx.AsyncClient) -> None:
    text = await page(http, "/jobs?status=done", status=400)
    assert "unknown status &#39;done&#39;" in text
    text = await page(http, "/jobs?offset=ten", status=400)
    assert "offset must be an integer, got &#39;ten&#39;" in text
    text = await page(http, "/jobs/nonsuch", status=404)
    assert "No job has the id &#39;nonsuch&#39;." in text
    assert "Traceback" not in text


async def test_every_job_field_is_escaped(client: Client, http: httpx.AsyncClient) -> None:
    job_id = await client.submit(
        build_job("email", {"to": XSS, "subject": "<img src=x onerror=alert(2)>", "latency": 0}),
        name=XSS,
        key="<b>key</b>",
    )
    for path in ("/jobs", f"/jobs/{job_id}"):
        text = await page(http, path)
        assert XSS not in text and "<img src=x" not in text and "<b>key" not in text
        assert html.escape(XSS) in text or html.escape(XSS, quote=False) in text


async def test_a_job_page_draws_its_dependency_neighbourhood(
    client: Client, http: httpx.AsyncClient
) -> None:
    first = await client.submit(email("a@example.com"), name="first")
    middle = await client.submit(email("b@example.com"), name="middle", depends_on=[first])
    last = await client.submit(email("c@example.com"), name="last", depends_on=[middle])
    text = await page(http, f"/jobs/{middle}")
    assert 'data-testid="dependency-graph"' in text
    for name in ("first", "middle", "last"):
        assert f">{name}</text>" in text
    assert text.count('<path class="edge"') == 2
    assert f'href="/jobs/{first}"' in text and f'href="/jobs/{last}"' in text
    assert 'hx-post="/api/jobs/' + middle + '/cancel"' in text  # pending: it can be cancelled
    assert "/retry" not in text


async def test_schedules_show_daylight_saving_marks(
    client: Client, http: httpx.AsyncClient
) -> None:
    from jobsched_plugins.cron_trigger import preview

    schedule = await client.add_schedule(
        email("ops@example.com", name="spring"),
        trigger={"cron": "30 2 28 3 *", "tz": "Europe/Berlin"},
    )
    (fire,) = preview("30 2 28 3 *", tz="Europe/Berlin", count=1)
    text = await page(http, "/schedules")
    assert f'data-schedule="{schedule}"' in text
    assert f"{fire.at:%Y-%m-%d %H:%M:%S %Z (%z)}" in text
    assert fire.note is not None and html.escape(fire.note) in text
    assert f'hx-post="/api/schedules/{schedule}/pause"' in text
    await client.pause_schedule(schedule)
    text = await page(http, "/schedules")
    assert f'hx-post="/api/schedules/{schedule}/resume"' in text and ">paused</span>" in text


async def test_limits_show_their_use(http: httpx.AsyncClient) -> None:
    text = await page(http, "/limits")
    assert 'data-limit="executor:async"' in text and 'data-limit="job_type:email"' in text
    assert "No rates limit is set." in text


async def test_a_read_only_dashboard_says_so(client: Client) -> None:
    app = create_app(client=client)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://dash") as http:
        text = await page(http, "/")
        assert "Read-only dashboard" in text
        login = await page(http, "/login")
        assert "nobody can log in" in login and 'name="token"' not in login


def test_docs_web_md_shows_screenshots_that_exist() -> None:
    docs = Path(__file__).resolve().parents[1] / "docs"
    images = re.findall(r"!\[[^\]]+\]\((web/[\w-]+\.png)\)", (docs / "web.md").read_text())
    assert {"web/overview.png", "web/jobs.png", "web/job.png", "web/login.png"} <= set(images)
    assert [image for image in images if not (docs / image).is_file()] == []


async def test_the_pages_of_an_in_process_scheduler() -> None:
    """``create_app(scheduler=...)``: the same pages over the memory store, jobs run."""

    async def double(x: int) -> int:
        return 2 * x

    async def broken() -> None:
        raise ValueError("no luck")

    async with JobScheduler(num_workers=2) as scheduler:
        app = create_app(scheduler=scheduler, token="t0ken")
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://dash") as http:
            local = app.state.dashboard.client
            done = await local.submit(double, 21)
            failed = await local.submit(broken, retry="none")
            for job_id in (done, failed):
                await local.wait(job_id, timeout=30)
            overview = await page(http, "/")
            assert '<div class="n">1</div>\n      <div class="label">completed' in overview
            listed = await page(http, "/jobs?status=failed")
            assert f'data-job="{failed}"' in listed and "ValueError: no luck" in listed
            detail = await page(http, f"/jobs/{done}")
            assert '<pre class="json">42</pre>' in detail
            assert f'hx-post="/api/jobs/{failed}/retry"' in await page(http, f"/jobs/{failed}")
            for path in ("/schedules", "/limits"):
                await page(http, path)


async def test_a_failed_jobs_page_shows_its_traceback_collapsed() -> None:
    def innermost_frame() -> None:
        raise ValueError("no luck <b>here</b>")

    async def broken() -> None:
        innermost_frame()

    async with JobScheduler(num_workers=1) as scheduler:
        app = create_app(scheduler=scheduler, token="t0ken")
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://dash") as http:
            local = app.state.dashboard.client
            failed = await local.submit(
                broken, retry={"policy": "fixed", "max_retries": 1, "seconds": 0}
            )
            await local.wait(failed, timeout=30)
            text = await page(http, f"/jobs/{failed}")
            api = (await http.get(f"/api/jobs/{failed}")).json()
    # Collapsed: a <details> without `open`, the traceback inside its <pre>.
    shown = re.search(
        r'<details class="traceback" data-testid="job-traceback"><summary>Traceback</summary>'
        r"<pre class=\"scroll\">(.*?)</pre></details>",
        text,
        re.S,
    )
    assert shown is not None, text
    assert "in innermost_frame" in shown.group(1)
    assert "<b>here</b>" not in text and html.escape("<b>here</b>", quote=False) in shown.group(1)
    # The retried attempt in the history has its own, collapsed too (in
    # memory the last attempt is the job's own fields, not a history row).
    assert text.count('<details class="traceback">') == 1
    assert "<details open" not in text
    assert "in innermost_frame" in api["traceback"]
    assert all("in innermost_frame" in a["traceback"] for a in api["history"])


async def test_a_job_page_says_which_workers_refused_it_and_why(
    client: Client, http: httpx.AsyncClient
) -> None:
    job_id = await client.submit(email("a@example.com"))
    store = client.store
    claimed, _ = await store.claim(1, "old-worker", types=["email"], refuser="old-worker#1")
    assert [r.job_id for r in claimed] == [job_id]
    why = f"JobSpecError: job {job_id} (email): unknown argument 'latency' {XSS}"
    assert await store.refuse([(job_id, why)], "old-worker", "old-worker#1", 5) == []
    text = await page(http, f"/jobs/{job_id}")
    api = (await http.get(f"/api/jobs/{job_id}")).json()
    assert "waiting for a worker that can build it" in text
    panel = text[text.index('data-testid="job-refusals"') :]
    assert "by 1 worker that could not build it from its arguments" in panel
    assert "unknown argument &#39;latency&#39;" in panel or "unknown argument 'latency'" in panel
    assert XSS not in text and html.escape(XSS, quote=False) in panel
    assert (api["build_refusals"], api["last_refusal"]) == (1, why)

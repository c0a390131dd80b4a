"""The schedules page and the job page's workflow in a real browser, on a
SQLite file in shared mode and on a PostgreSQL schema: a schedule created
from the page's form (its field errors first), described in plain English,
run, edited; a schedule nobody fires marked overdue; a three-layer workflow
(a chain into a chord) drawn whole with every member's status. The fixtures
(processes, browser) are test_web_browser's; with JOBSCHED_UPDATE_SCREENSHOTS=1
the SQLite run saves docs/web/schedules.png and docs/web/job-workflow.png."""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from pathlib import Path

import pytest

from jobsched import BlockingClient, Client, JobStatus, PluginManager, chain, chord, group
from jobsched.store import SharedScheduleRow
from test_web_browser import (  # noqa: F401 (fixtures, used by name)
    Browser,
    Process,
    browser,
    client,
    dashboard,
    expect,
    gated,
    plugin_env,
    plugins,
    screenshots,
    store_url,
    tab,
    worker,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def store_a_schedule_nobody_fires(url: str) -> str:
    """A schedule a process with job type ``ghost`` (installed nowhere here)
    added an hour ago: no process can fire it since, so it is overdue."""
    then = time.time() - 3600
    row = SharedScheduleRow(
        schedule_id="sched-ghost-nightly",
        type="ghost",
        args={},
        options={"name": "ghost-nightly"},
        trigger={"interval": 86400.0, "origin": then},
        next_run=then,
        allow_overlap=False,
    )

    async def store() -> None:
        async with Client(url) as opened:
            await opened.store.add_schedule(row)

    # On a thread of its own: Playwright's sync API runs a loop in this one.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, store()).result()
    return row.schedule_id


def test_a_schedule_is_created_described_run_and_edited_from_the_page(
    client: BlockingClient,  # noqa: F811
    worker: Process,  # noqa: F811
    tab: Browser,  # noqa: F811
    store_url: str,  # noqa: F811
    tmp_path: Path,
    screenshots: Path,  # noqa: F811
) -> None:
    ghost = store_a_schedule_nobody_fires(store_url)
    tab.log_in()
    tab.open("/schedules")
    tab.live()
    tab.settled()
    form = tab.tab.locator("[data-testid=create-schedule]")
    tab.tab.locator("details.create > summary").click()
    form.locator("select[name=type]").select_option("gated")
    flag = tmp_path / "never-there"
    form.locator("textarea[name=args]").fill(f'{{"flag": "{flag}", "label": "nightly"}}')
    form.locator("input[name=kind][value=cron]").check()
    # Two bad fields: each gets its own line beside it, nothing is stored.
    form.locator("input[name=cron]").fill("61 * * * *")
    form.locator("input[name=tz]").fill("Mars/Olympus")
    form.get_by_role("button", name="Create schedule").click()
    cron_error = form.locator('[data-error-for="cron"]')
    expect(cron_error).to_contain_text("invalid cron expression '61 * * * *'")
    assert "Not done: cron: invalid cron expression" in tab.flash_says("Not done")
    form.locator("input[name=cron]").fill("0 2 * * 1")
    form.get_by_role("button", name="Create schedule").click()
    tz_error = form.locator('[data-error-for="tz"]')
    expect(tz_error).to_contain_text("unknown time zone 'Mars/Olympus'")
    expect(cron_error).to_be_hidden()
    assert [s.schedule_id for s in client.schedules()] == [ghost]

    form.locator("input[name=tz]").fill("Europe/Berlin")
    form.get_by_role("button", name="Create schedule").click()
    tab.flash_says("Schedule created.")
    (created,) = [s for s in client.schedules() if s.schedule_id != ghost]
    assert created.trigger["cron"] == "0 2 * * 1" and created.args["label"] == "nightly"
    row = tab.tab.locator(f'tr[data-schedule="{created.schedule_id}"]')
    # The live region shows it, described in plain English, not overdue.
    expect(row.locator("[data-testid=cron-description]")).to_have_text("At 02:00, only on Monday")
    expect(row.locator("[data-testid=overdue]")).to_have_count(0)

    # Run it now, twice: the worker runs both; their runs show, newest first.
    for n in (1, 2):
        row.get_by_role("button", name="Run now").click()
        tab.flash_says("Triggered")
        expect(row.locator("[data-testid=last-runs] .run.s-completed")).to_have_count(n)
    runs = client.schedule_runs(created.schedule_id)
    assert [r.status for r in runs] == [JobStatus.COMPLETED] * 2
    links = row.locator("[data-testid=last-runs] a.run")
    assert links.evaluate_all("els => els.map(a => a.getAttribute('href'))") == [
        f"/jobs/{r.job_id}" for r in runs
    ]
    expect(links.first).to_contain_text("ok")

    # The schedule nobody fires: marked overdue, its runs none yet.
    late = tab.tab.locator(f'tr[data-schedule="{ghost}"]')
    expect(late.locator("[data-testid=overdue]")).to_have_text("overdue")
    expect(late).to_contain_text("no process fires it (workers down?)")
    tab.open("/schedules")  # the create form closed again, for the picture
    tab.shoot("schedules", screenshots)

    # Edit: a new rule and new arguments; the page goes back to the list.
    row = tab.tab.locator(f'tr[data-schedule="{created.schedule_id}"]')
    row.get_by_role("link", name="Edit").click()
    edit = tab.tab.locator("[data-testid=edit-schedule]")
    assert edit.locator("input[name=cron]").input_value() == "0 2 * * 1"
    assert edit.locator("input[name=tz]").input_value() == "Europe/Berlin"
    assert '"label": "nightly"' in edit.locator("textarea[name=args]").input_value()
    edit.locator("input[name=kind][value=interval]").check()
    edit.locator("input[name=every]").fill("-5")
    edit.get_by_role("button", name="Save").click()
    expect(edit.locator('[data-error-for="every"]')).to_have_text(
        "must be a positive number of seconds, got -5"
    )
    edit.locator("input[name=every]").fill("600")
    edit.locator("textarea[name=args]").fill(f'{{"flag": "{flag}", "label": "edited"}}')
    with tab.tab.expect_navigation():
        edit.get_by_role("button", name="Save").click()
    assert tab.tab.url.endswith("/schedules")
    now = {s.schedule_id: s for s in client.schedules() if s.active}
    (new_id,) = set(now) - {ghost}
    assert new_id != created.schedule_id
    assert now[new_id].trigger["interval"] == 600 and now[new_id].args["label"] == "edited"
    edited = tab.tab.locator(f'tr[data-schedule="{new_id}"]')
    expect(edited).to_contain_text("every 10 min")
    old = tab.tab.locator(f'tr[data-schedule="{created.schedule_id}"]')
    expect(old.locator(".pill")).to_have_text("ended")
    assert tab.dialogs == [] and tab.errors == []


def test_the_job_page_draws_the_whole_workflow_with_every_status(
    client: BlockingClient,  # noqa: F811
    plugins: PluginManager,  # noqa: F811
    worker: Process,  # noqa: F811
    tab: Browser,  # noqa: F811
    tmp_path: Path,
    screenshots: Path,  # noqa: F811
) -> None:
    open_gate, closed_gate = tmp_path / "open", tmp_path / "closed"
    closed_gate.touch()
    extract = gated(plugins, open_gate, "extract", name="extract")
    parts = [
        gated(plugins, open_gate, "part a", name="part-a"),
        gated(plugins, closed_gate, "part b", name="part-b"),  # fails
        gated(plugins, open_gate, "part c", name="part-c"),
    ]
    report = gated(plugins, open_gate, "report", name="report")
    # extract, then the three parts, then the report once all of them
    # completed (a chord): three layers.
    report_id = client.submit(chain(extract, chord(group(*parts), report)))
    assert client.wait(report_id, timeout=60).status is JobStatus.CANCELLED
    failed = [j for j in client.jobs(status="failed")]
    assert [j.name for j in failed] == ["part-b"]

    tab.open(f"/jobs/{failed[0].job_id}")
    graph = tab.tab.locator("[data-testid=dependency-graph]")
    expected = {
        "extract": "completed",
        "part-a": "completed",
        "part-b": "failed",
        "part-c": "completed",
        "report": "cancelled",
    }
    for name, status in expected.items():
        node = graph.locator(".node", has_text=name)
        expect(node).to_have_count(1)
        expect(node).to_have_class(f"node s-{status}" + (" focus" if name == "part-b" else ""))
    # Three layers, left to right; the parts in one column.
    xs = {
        name: graph.locator(".node", has_text=name).evaluate(
            "g => g.transform.baseVal.consolidate().matrix.e"
        )
        for name in expected
    }
    assert xs["extract"] < xs["part-a"] == xs["part-b"] == xs["part-c"] < xs["report"]
    assert graph.locator("path.edge").count() == 6
    # Every member but the page's own job links to its page.
    hrefs = graph.locator("a").evaluate_all("els => els.map(a => a.getAttribute('href'))")
    assert len(hrefs) == 4 and f"/jobs/{failed[0].job_id}" not in hrefs
    expect(tab.tab.locator("[data-testid=workflow-more]")).to_have_count(0)
    tab.shoot("job-workflow", screenshots)
    assert tab.dialogs == [] and tab.errors == []

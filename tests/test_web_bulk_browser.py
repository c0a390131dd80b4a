"""Bulk actions on the Jobs page in Chromium, on shared SQLite and PostgreSQL.

A real ``jobsched worker`` fails 500 jobs (their gate is closed); the browser
filters the Jobs page to ``failed``, ticks the page, selects all 500 jobs
matching the filter, clicks Retry and confirms the dialog that names the
count; the store then holds 500 retried jobs, which the worker runs to
completion. The same page at 390 px wide keeps its selection bar and
actions on screen. The fixtures (processes, browser, tab) are those of
tests/test_web_browser.py; the SQLite run's screenshots go to docs/web
with JOBSCHED_UPDATE_SCREENSHOTS=1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jobsched import BlockingClient, JobStatus, PluginManager
from test_web_browser import (  # noqa: F401 (fixtures, used by name)
    WAIT_MS,
    Browser,
    Process,
    browser,
    client,
    dashboard,
    gated,
    plugin_env,
    plugins,
    screenshots,
    store_url,
    tab,
    worker,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

#: How many failed jobs the test retries in one click.
FAILED = 500


def shoot(shown: Browser, name: str, folder: Path) -> None:
    """What the screen shows (a modal dialog's backdrop covers the screen, not the page)."""
    folder.mkdir(parents=True, exist_ok=True)
    shown.tab.screenshot(path=str(folder / f"{name}.png"))


def fail_many(producer: BlockingClient, manager: PluginManager, flag: Path, n: int) -> list[str]:
    """`n` jobs the worker failed (their gate was closed); their ids, oldest first."""
    flag.touch()
    ids = producer.submit_many([gated(manager, flag, f"job {i}") for i in range(n)])
    for info in producer.wait_many(ids, timeout=240):
        assert info.status is JobStatus.FAILED, info
    return ids


def test_bulk_retry_of_500_failed_jobs_in_one_click(
    client: BlockingClient,  # noqa: F811
    plugins: PluginManager,  # noqa: F811
    worker: Process,  # noqa: F811
    tab: Browser,  # noqa: F811
    tmp_path: Path,
    screenshots: Path,  # noqa: F811
) -> None:
    flag = tmp_path / "gate"
    ids = fail_many(client, plugins, flag, FAILED)
    tab.log_in()
    tab.open("/jobs?status=failed")
    tab.live()
    page = tab.tab
    bar = page.locator("#bulk")
    assert bar.locator("[data-bulk-count]").inner_text() == "Select jobs to act on them."
    assert "at most 10,000 jobs" in bar.inner_text()
    # The page's 50 rows, then every job matching the filter.
    page.get_by_label("Select every job on this page").check()
    assert bar.locator("[data-bulk-count]").inner_text() == "50 jobs selected."
    everything = bar.locator("[data-bulk-all]")
    assert everything.inner_text() == (
        f"Select all {FAILED} jobs matching this filter (capped at 10,000)"
    )
    everything.click()
    count = bar.locator("[data-bulk-count]")
    assert count.inner_text() == f"All {FAILED} jobs matching this filter are selected."

    flag.unlink()  # retried, they pass
    bar.get_by_role("button", name="Retry").click()
    dialog = page.locator("#bulk-confirm")
    assert dialog.is_visible()
    assert dialog.locator("h2").inner_text() == f"Retry {FAILED} jobs?"
    assert "Failed, timed-out and cancelled jobs among them run again" in dialog.inner_text()
    shoot(tab, "jobs-bulk", screenshots)
    # Nothing was done while it asked.
    assert client.stats().counts.get("failed") == FAILED

    dialog.get_by_role("button", name=f"Retry {FAILED} jobs").click()
    result = bar.locator("[data-bulk-result]")
    page.wait_for_function(
        "() => !document.querySelector('[data-bulk-result]').hidden", timeout=WAIT_MS
    )
    assert result.inner_text() == f"Retried {FAILED} of {FAILED} jobs."
    assert "ok" in (result.get_attribute("class") or "")
    # The selection is gone with the action.
    assert count.inner_text() == "Select jobs to act on them."

    # The store has 500 retried jobs: each runs again and completes, its
    # failed attempt kept in its history.
    done = client.wait_many(ids, timeout=240)
    assert {info.status for info in done} == {JobStatus.COMPLETED}
    assert client.stats().counts.get("failed", 0) == 0
    first = client.get(ids[0])
    assert [a.status for a in first.history] == ["failed", "completed"], first.history
    assert tab.dialogs == [] and tab.errors == []


def test_the_selection_bar_fits_a_phone(
    browser: Any,  # noqa: F811
    dashboard: str,  # noqa: F811
    client: BlockingClient,  # noqa: F811
    plugins: PluginManager,  # noqa: F811
    worker: Process,  # noqa: F811
    tmp_path: Path,
    screenshots: Path,  # noqa: F811
) -> None:
    fail_many(client, plugins, tmp_path / "gate", 60)
    context = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        narrow = Browser(context.new_page(), dashboard)
        narrow.tab.set_default_timeout(WAIT_MS)
        narrow.log_in()
        narrow.open("/jobs?status=failed")
        page = narrow.tab
        page.get_by_label("Select every job on this page").check()
        page.locator("[data-bulk-all]").click()
        bar = page.locator("#bulk")
        assert bar.locator("[data-bulk-count]").inner_text() == (
            "All 60 jobs matching this filter are selected."
        )
        # A live refresh of the rows keeps the selection.
        page.evaluate(
            "() => htmx.ajax('GET', location.pathname + location.search,"
            " {target: '#region', swap: 'outerHTML', select: '#region'})"
        )
        boxes = page.locator("input[data-bulk-job]")
        assert boxes.count() == 50
        assert all(boxes.nth(i).is_checked() for i in range(50))
        assert page.get_by_label("Select every job on this page").is_checked()
        # The page does not scroll sideways: the table scrolls inside its panel.
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        for name in ("Retry", "Cancel", "Purge"):
            box = bar.get_by_role("button", name=name).bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, name
        shoot(narrow, "jobs-bulk-phone", screenshots)
        bar.get_by_role("button", name="Purge").click()
        dialog = page.locator("#bulk-confirm")
        assert dialog.locator("h2").inner_text() == "Purge 60 jobs?"
        box = dialog.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
        # "Don't" closes it: nothing is purged.
        dialog.get_by_role("button", name="Don't").click()
        assert not dialog.is_visible()
        assert client.stats().counts.get("failed") == 60
        assert narrow.dialogs == [] and narrow.errors == []
    finally:
        context.close()

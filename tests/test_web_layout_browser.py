"""The dashboard's layout in Chromium: nothing overflows its card, at three sizes.

Every page (overview, jobs, a job with a long argument and a traceback,
schedules, queues, limits, workers, login) is loaded at 1280 by 800, 1920 by 1080
and on a 390 by 844 phone, logged in (the widest top bar), against a real
``jobsched web`` and ``jobsched worker`` on a SQLite file in shared mode.
`OVERFLOWS` (JavaScript, in the page) lists what does not fit: a page wider
than the viewport, a card (``.panel``, ``.count``, ``.flash``, the top bar,
the page head) whose content is wider than it, an element sticking out of
its card, a box that scrolls sideways without being a ``.scroll`` box (the
deliberate ones: every table is in one, a traceback is one), a table outside
one. The fixtures (processes, browser) are those of tests/test_web_browser.py.
The phone's views are shot as docs/web/phone-*.png under
JOBSCHED_UPDATE_SCREENSHOTS=1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jobsched import BlockingClient, JobStatus, PluginManager, build_job
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
    worker,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

VIEWPORTS = {"desktop": (1280, 800), "wide": (1920, 1080), "phone": (390, 844)}

#: What does not fit on the page, one line each ([] when everything does).
OVERFLOWS = """
() => {
  const CARDS = ".panel, .count, .flash, .topbar, .page-head";
  const out = [];
  const name = (el) => {
    let text = el.tagName.toLowerCase();
    if (el.id) { text += "#" + el.id; }
    for (const c of el.classList) { text += "." + c; }
    const testid = el.getAttribute("data-testid");
    if (testid) { text += `[data-testid=${testid}]`; }
    return text;
  };
  const shown = (el) => el.getClientRects().length > 0;
  const clips = (el) => getComputedStyle(el).overflowX !== "visible";
  const width = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth > width) {
    out.push(`the page is ${document.documentElement.scrollWidth}px wide in ${width}px`);
  }
  for (const card of document.querySelectorAll(CARDS)) {
    if (shown(card) && card.scrollWidth > card.clientWidth + 1) {
      out.push(`${name(card)}: ${card.scrollWidth}px of content in ${card.clientWidth}px`);
    }
  }
  for (const el of document.querySelectorAll("body *")) {
    if (!shown(el) || (el.closest("svg") && el.tagName.toLowerCase() !== "svg")) { continue; }
    let up = el.parentElement;
    while (up && up !== document.body && !clips(up)) { up = up.parentElement; }
    if (up && up !== document.body) { continue; }  // a scroll box's content: the box is checked
    const card = el.parentElement.closest(CARDS);
    const box = card ? card.getBoundingClientRect() : { left: 0, right: width };
    const r = el.getBoundingClientRect();
    if (r.width > 0 && (r.left < box.left - 1 || r.right > box.right + 1)) {
      const where = card ? name(card) : "the viewport";
      out.push(`${name(el)} (${Math.round(r.left)} to ${Math.round(r.right)}) sticks out of ` +
               `${where} (${Math.round(box.left)} to ${Math.round(box.right)})`);
    }
  }
  for (const el of document.querySelectorAll("body *")) {
    const x = getComputedStyle(el).overflowX;
    // A text area scrolls its own text, as every browser's does.
    if ((x === "auto" || x === "scroll") && !el.classList.contains("scroll") &&
        el.tagName !== "TEXTAREA") {
      out.push(`${name(el)} scrolls sideways but is no .scroll box`);
    }
  }
  for (const table of document.querySelectorAll("table")) {
    if (!table.parentElement.classList.contains("scroll")) {
      out.push(`${name(table)} is not in a .scroll box`);
    }
  }
  return out;
}
"""


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_no_page_overflows_its_cards_on_a_desktop_a_wide_screen_or_a_phone(
    browser: Any,  # noqa: F811
    dashboard: str,  # noqa: F811
    client: BlockingClient,  # noqa: F811
    plugins: PluginManager,  # noqa: F811
    worker: Process,  # noqa: F811
    tmp_path: Path,
    screenshots: Path,  # noqa: F811
) -> None:
    closed = tmp_path / "closed-gate"
    closed.touch()
    # A long argument (one word, no place to break), a long name, a traceback.
    label = "quarterly-revenue-report-" + "x" * 400
    failed = client.submit(
        gated(plugins, closed, label), name="nightly-import-of-every-customer-invoice-2026-q4"
    )
    done = [
        client.submit(
            build_job(
                "email",
                {"to": f"user{i}@example.com", "subject": "welcome", "latency": 0},
                plugins=plugins,
            ),
            name=f"welcome-{i}",
        )
        for i in range(3)
    ]
    for i in range(2):  # a queue no worker serves: its depth and oldest age
        client.submit(
            build_job("email", {"to": "x@example.com", "subject": "later", "latency": 0}),
            queue="newsletters-europe-west",
            name=f"newsletter-{i}",
        )
    client.add_schedule(
        build_job(
            "email", {"to": "ops@example.com", "subject": "backup", "latency": 0}, name="backup"
        ),
        trigger={"cron": "30 2 28 3 *", "tz": "Europe/Berlin"},
    )
    client.add_schedule(
        build_job("sleep", {"name": "cleanup", "seconds": 0}, name="hourly-cleanup"),
        every=3600,
        start_in=3600,
    )
    assert client.wait(failed, timeout=60).status is JobStatus.FAILED
    client.wait_many(done, timeout=60)
    assert client.get(failed).traceback

    pages = {
        "overview": "/",
        "jobs": "/jobs",
        "job": f"/jobs/{failed}",
        "schedules": "/schedules",
        "queues": "/queues",
        "limits": "/limits",
        "workers": "/workers",
        "login": "/login",
    }
    problems: list[str] = []
    for size, (width, height) in VIEWPORTS.items():
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        tab = Browser(page, dashboard)
        try:
            tab.log_in()
            for name, path in pages.items():
                tab.open(path)
                if name != "login":
                    tab.settled()  # the live part as the event stream's first refresh left it
                if name == "job":  # its traceback open: the widest it gets
                    page.locator("[data-testid=job-traceback] summary").click()
                problems += [f"{name} at {width}px: {p}" for p in page.evaluate(OVERFLOWS)]
                if size == "phone":
                    tab.shoot(f"phone-{name}", screenshots)
            assert tab.dialogs == [] and tab.errors == []
        finally:
            context.close()
    assert problems == [], "\n".join(problems)

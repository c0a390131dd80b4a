"""The dashboard in a real browser: Debian's Chromium driven by Playwright.

Each test runs a real ``jobsched web`` process and a real ``jobsched worker``
process on a SQLite file in shared mode and on a PostgreSQL schema; the test
submits through a `BlockingClient`, and the browser reads and acts through
the pages only. The worker finds this suite's job types (tests/web_jobs.py)
as an installed plugin: a ``*.dist-info`` on its ``PYTHONPATH``.

Chromium is the system's (``/usr/bin/chromium``, ``apt-get install chromium``);
nothing is downloaded at run time (never ``playwright install``). Without
Chromium or Playwright the tests skip, except under
``JOBSCHED_REQUIRE_SERVICES=1`` (CI), where they fail. Every page is shot;
with JOBSCHED_UPDATE_SCREENSHOTS=1 the SQLite run saves them to docs/web/,
which docs/web.md shows.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import web_jobs
from jobsched import BlockingClient, JobStatus, Limits, PluginManager, build_job
from worker_support import shared_store

try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # the browser fixture skips (or fails in CI) with the reason
    expect = sync_playwright = None

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
SCREENSHOTS = ROOT / "docs" / "web"
CHROMIUM = Path("/usr/bin/chromium")
TOKEN = "correct-horse-battery-staple"
#: How long the browser waits for anything (the page, a live update).
WAIT_MS = 30_000
XSS = "<script>alert(1)</script>"


def _missing(what: str) -> None:
    """Skip for `what` is missing, or fail when CI requires the services."""
    if os.environ.get("JOBSCHED_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{what}, but JOBSCHED_REQUIRE_SERVICES=1")
    pytest.skip(what)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if sync_playwright is None:
        _missing("playwright is not installed (pip install -e '.[dev]')")
    if not CHROMIUM.exists():
        _missing(f"{CHROMIUM} is missing (apt-get install chromium)")
    expect.set_options(timeout=WAIT_MS)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield launched
        finally:
            launched.close()


class Browser:
    """One browser tab on the dashboard, with what went wrong in it."""

    def __init__(self, tab: Any, base: str) -> None:
        self.tab = tab
        self.base = base
        #: Alerts, confirms and prompts the page opened (an XSS would be one).
        self.dialogs: list[str] = []
        #: Uncaught script errors in the page.
        self.errors: list[str] = []
        tab.on("dialog", self._dialog)
        tab.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        # A confirm() the dashboard asks (Cancel) is accepted; anything else is recorded.
        dialog.accept()

    def open(self, path: str) -> Any:
        response = self.tab.goto(self.base + path)
        assert response is not None
        assert response.ok, f"GET {path}: {response.status}\n{response.text()[:2000]}"
        return response

    def log_in(self, token: str = TOKEN) -> None:
        self.open("/login")
        self.tab.fill("input[name=token]", token)
        with self.tab.expect_navigation():
            self.tab.click("button[type=submit]")

    def flash_says(self, text: str) -> str:
        """Wait until the page's message box (#flash) contains `text`; its whole text."""
        self.tab.wait_for_function(
            "text => document.getElementById('flash').innerText.includes(text)", arg=text
        )
        return str(self.tab.inner_text("#flash"))

    def live(self) -> None:
        """Wait until the page's event stream is connected."""
        self.tab.wait_for_selector("#live[data-state=on]", timeout=WAIT_MS)

    def settled(self) -> None:
        """Wait until the page's live part was fetched again for the stream's
        first event: a button clicked while it is swapped reports nothing."""
        self.tab.wait_for_function("() => Number(document.body.dataset.refreshed || 0) >= 1")

    def shoot(self, name: str, folder: Path | None) -> None:
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            self.tab.screenshot(path=str(folder / f"{name}.png"), full_page=True)


# ── processes ──────────────────────────────────────────────────────────
@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store several processes share: a SQLite file or a PostgreSQL schema."""
    return shared_store(request, tmp_path)


@pytest.fixture
def plugin_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a process that finds tests/web_jobs.py as the plugin ``webtest``."""
    site = tmp_path / "site"
    info = site / "jobsched_webtest-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: jobsched-webtest\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[jobsched]\nwebtest = web_jobs\n")
    (info / "RECORD").write_text("")
    path = [str(site), str(TESTS), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}


def _console_script() -> str:
    """The ``jobsched`` console script of this interpreter's environment."""
    script = Path(sys.executable).with_name("jobsched")
    return str(script) if script.exists() else "jobsched"


class Process:
    """A ``jobsched`` subprocess; its stdout and stderr lines are collected until it exits."""

    def __init__(self, args: list[str], env: dict[str, str], ready: str) -> None:
        self.args = args
        self.proc = subprocess.Popen(
            [_console_script(), *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.log: list[str] = []
        #: The first line containing `ready`, once it was printed.
        self.ready_line = ""
        self._ready_text = ready
        self._ready = threading.Event()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._readers = [
            threading.Thread(target=self._read, args=(stream,), daemon=True)
            for stream in (self.proc.stdout, self.proc.stderr)
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self.log.append(line)
            if self._ready_text in line and not self._ready.is_set():
                self.ready_line = line
                self._ready.set()

    def wait_ready(self, timeout: float = 60) -> str:
        """The ready line; fails the test if the process exits or stays silent."""
        deadline = time.monotonic() + timeout
        while not self._ready.wait(timeout=0.1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(
                    f"jobsched {' '.join(self.args)} did not print {self._ready_text!r} "
                    f"(exit code {self.proc.returncode}):\n" + "".join(self.log[-40:])
                )
        return self.ready_line

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for reader in self._readers:
            reader.join(timeout=10)


@pytest.fixture
def worker(store_url: str, plugin_env: dict[str, str]) -> Iterator[Process]:
    args = ["worker", "--store", store_url, "--workers=4", "--grace=0"]
    process = Process(args, plugin_env, ready="shared scheduler started")
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


@pytest.fixture
def dashboard(store_url: str, plugin_env: dict[str, str], client: BlockingClient) -> Iterator[str]:
    """``jobsched web --store URL --port 0 --token TOKEN``; its base URL (it prints it).

    The store exists first (`client` made it): the dashboard creates none.
    """
    env = {**plugin_env}
    env.pop("JOBSCHED_WEB_TOKEN", None)
    args = ["web", "--store", store_url, "--port", "0", "--token", TOKEN]
    process = Process(args, env, ready="jobsched web: http://")
    try:
        line = process.wait_ready()
        base = line.split("jobsched web: ", 1)[1].split()[0].rstrip("/")
        with urllib.request.urlopen(base + "/healthz", timeout=30) as response:
            assert response.status == 200
        yield base
    finally:
        process.stop()


@pytest.fixture
def plugins() -> PluginManager:
    return PluginManager([web_jobs])


@pytest.fixture
def client(store_url: str, plugins: PluginManager) -> Iterator[BlockingClient]:
    limits = Limits(executors={"async": 16}, job_types={"gated": 4, "steps": 2})
    opened = BlockingClient(store_url, plugins=plugins, limits=limits)
    opened.open()
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def tab(browser: Any, dashboard: str) -> Iterator[Browser]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    try:
        yield Browser(page, dashboard)
    finally:
        context.close()


@pytest.fixture
def screenshots(store_url: str, tmp_path: Path) -> Path:
    """Where the screenshots go: docs/web for the SQLite run when
    JOBSCHED_UPDATE_SCREENSHOTS=1 asks for them (so a test run leaves the
    checkout as it was), else tmp_path (every page is still shot)."""
    if store_url.startswith("sqlite:") and os.environ.get("JOBSCHED_UPDATE_SCREENSHOTS") == "1":
        return SCREENSHOTS
    return tmp_path / "screenshots"


def until(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    """Wait for a condition the test cannot be told about (a worker's progress)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def gated(plugins: PluginManager, flag: Path, label: str, **options: Any) -> Any:
    return build_job(
        "gated",
        {"flag": str(flag), "label": label},
        plugins=plugins,
        retry={"policy": "none"},
        **options,
    )


def failed_job(client: BlockingClient, plugins: PluginManager, flag: Path) -> str:
    """A job that failed (its gate was closed): its id."""
    flag.touch()
    job_id = client.submit(gated(plugins, flag, "retry me"), name="nightly-import")
    done = client.wait(job_id, timeout=60)
    assert done.status is JobStatus.FAILED, done
    return job_id


# ── the tests ──────────────────────────────────────────────────────────
def test_every_page_shows_the_store(
    client: BlockingClient,
    plugins: PluginManager,
    worker: Process,
    tab: Browser,
    tmp_path: Path,
    screenshots: Path,
) -> None:
    open_gate, closed_gate, hold = tmp_path / "open", tmp_path / "closed", tmp_path / "hold"
    closed_gate.touch()
    hold.touch()
    emails = [
        client.submit(
            build_job("email", {"to": f"user{i}@example.com", "subject": "hello", "latency": 0}),
            name=f"welcome-{i}",
        )
        for i in range(4)
    ]
    extract = client.submit(gated(plugins, open_gate, "extract"), name="extract")
    transform = client.submit(
        gated(plugins, open_gate, "transform"), name="transform", depends_on=[extract]
    )
    load = client.submit(gated(plugins, closed_gate, "load"), name="load", depends_on=[transform])
    report = client.submit(gated(plugins, open_gate, "report"), name="report", depends_on=[load])
    audit = client.submit(gated(plugins, open_gate, "audit"), name="audit", depends_on=[transform])
    running = client.submit(
        build_job("steps", {"flag": str(hold), "steps": 8}, plugins=plugins), name="resize-tiles"
    )
    schedule = client.add_schedule(
        build_job(
            "email",
            {"to": "ops@example.com", "subject": "backup", "latency": 0},
            name="nightly-report",
        ),
        trigger={"cron": "30 2 28 3 *", "tz": "Europe/Berlin"},
    )
    client.add_schedule(
        build_job("sleep", {"name": "cleanup", "seconds": 0}, name="hourly-cleanup"),
        every=3600,
        start_in=3600,
    )
    for job_id in [*emails, extract, transform, audit]:
        assert client.wait(job_id, timeout=60).status is JobStatus.COMPLETED
    assert client.wait(load, timeout=60).status is JobStatus.FAILED
    until(lambda: getattr(client.get(running).progress, "done", 0) == 8, "the job's progress")

    # Jobs: every submitted job is listed, newest first.
    tab.open("/jobs")
    tab.live()
    listed = tab.tab.eval_on_selector_all("tr[data-job]", "rows => rows.map(r => r.dataset.job)")
    everything = [*emails, extract, transform, load, report, audit, running]
    assert set(everything) <= set(listed)
    assert listed.index(running) < listed.index(emails[0])
    assert "resize-tiles" in tab.tab.inner_text(f'tr[data-job="{running}"]')
    tab.shoot("jobs", screenshots)

    # Filters: failed jobs only, then a text search.
    tab.tab.select_option("select[name=status]", "failed")
    tab.tab.wait_for_function(
        "() => [...document.querySelectorAll('tr[data-job]')].length === 1", timeout=WAIT_MS
    )
    assert tab.tab.eval_on_selector_all("tr[data-job]", "r => r.map(x => x.dataset.job)") == [load]

    # Overview: the counts, the chart, the worker holding the running job.
    tab.open("/")
    tab.live()
    completed = tab.tab.inner_text("a.count.s-completed .n")
    assert int(completed) == client.stats().counts["completed"]
    assert tab.tab.inner_text("[data-testid=queue-state]") == "running"
    expect(tab.tab.locator("svg.chart rect.completed")).not_to_have_count(0)
    assert worker_identity(client, running) in tab.tab.inner_text("body")
    tab.shoot("overview", screenshots)

    # A job with its whole workflow: extract -> transform -> load -> report,
    # and audit (report, which waits for load, is two steps away: drawn too).
    tab.open(f"/jobs/{transform}")
    graph = tab.tab.locator("[data-testid=dependency-graph]")
    for name in ("extract", "transform", "load", "audit", "report"):
        expect(graph.get_by_text(name, exact=True)).to_have_count(1)
    expect(graph.locator(".node.focus.s-completed")).to_have_count(1)
    expect(graph.locator(".node.s-failed")).to_have_count(1)
    tab.shoot("job", screenshots)

    # A running job's progress bar.
    tab.open(f"/jobs/{running}")
    expect(tab.tab.locator(".progress")).to_contain_text("8 / 8 (100%)")
    tab.shoot("job-running", screenshots)

    # Schedules: the next fires with the daylight-saving mark `schedule preview` shows.
    from jobsched_plugins.cron_trigger import preview

    fires = preview("30 2 28 3 *", tz="Europe/Berlin", count=1)
    assert fires[0].note, "28 March at 02:30 falls in Berlin's spring-forward gap"
    tab.open("/schedules")
    row = tab.tab.locator(f'tr[data-schedule="{schedule}"]')
    assert fires[0].note in row.inner_text()
    assert f"{fires[0].at:%Y-%m-%d %H:%M:%S}" in row.inner_text()
    tab.shoot("schedules-dst", screenshots)

    # Limits: what the cluster allows and uses.
    tab.open("/limits")
    assert "steps" in tab.tab.inner_text('tr[data-limit="job_type:steps"]')
    tab.shoot("limits", screenshots)

    tab.open("/login")
    tab.shoot("login", screenshots)
    hold.unlink()
    assert client.wait(running, timeout=60).status is JobStatus.COMPLETED
    assert tab.dialogs == [] and tab.errors == []


def worker_identity(client: BlockingClient, job_id: str) -> str:
    owner = client.get(job_id).lease_owner
    assert owner is not None
    return owner


def test_retry_runs_a_failed_job_again_and_the_page_follows_live(
    client: BlockingClient,
    plugins: PluginManager,
    worker: Process,
    tab: Browser,
    tmp_path: Path,
    screenshots: Path,
) -> None:
    flag = tmp_path / "gate"
    job_id = failed_job(client, plugins, flag)
    tab.log_in()
    tab.open(f"/jobs/{job_id}")
    tab.live()
    status = tab.tab.locator("[data-testid=job-status]")
    assert status.inner_text() == "failed"
    assert "the gate gate is closed" in tab.tab.inner_text("body")
    tab.shoot("job-failed", screenshots)
    # Its traceback is collapsed under the error until asked for.
    traceback = tab.tab.locator("[data-testid=job-traceback]")
    expect(traceback.locator("pre")).to_be_hidden()
    traceback.locator("summary").click()
    expect(traceback.locator("pre")).to_be_visible()
    expect(traceback.locator("pre")).to_contain_text("in run")

    flag.unlink()
    tab.tab.evaluate("window.notReloaded = true")
    tab.tab.get_by_role("button", name="Retry").click()
    # The worker runs it again; the event stream brings the new status.
    tab.tab.wait_for_function(
        "() => document.querySelector('[data-testid=job-status]').innerText === 'completed'",
        timeout=WAIT_MS,
    )
    assert tab.tab.evaluate("window.notReloaded") is True
    tab.flash_says("Retried")
    done = client.get(job_id)
    assert done.status is JobStatus.COMPLETED and done.result == {"label": "retry me"}
    assert [a.status for a in done.history][:1] == ["failed"], done.history
    assert tab.dialogs == [] and tab.errors == []


def test_the_queues_page_pauses_and_resumes_one_queue(
    client: BlockingClient,
    plugins: PluginManager,
    worker: Process,
    tab: Browser,
    screenshots: Path,
) -> None:
    def email(i: int, **options: Any) -> Any:
        args = {"to": f"user{i}@example.com", "subject": "hi", "latency": 0}
        return build_job("email", args, plugins=plugins, **options)

    # The worker serves the default queue: "emails" waits, "default" runs.
    done = [client.submit(email(i)) for i in range(3)]
    waiting = [client.submit(email(i, queue="emails")) for i in range(4)]
    client.wait_many(done, timeout=60)
    tab.log_in()
    tab.open("/queues")
    tab.live()
    tab.settled()
    row = tab.tab.locator("tr[data-queue=emails]")
    expect(row.locator("[data-testid=depth]")).to_have_text("4")
    expect(row.locator("[data-testid=state]")).to_contain_text("active")
    row.get_by_role("button", name="Pause").click()
    tab.flash_says("Queue emails paused")
    expect(row.locator("[data-testid=state]")).to_contain_text("paused")
    expect(row.get_by_role("button", name="Resume")).to_be_visible()
    default = tab.tab.locator("tr[data-queue=default]")
    expect(default.locator("[data-testid=state]")).to_contain_text("active")
    tab.shoot("queues", screenshots)
    assert client.queue_paused("emails") and not client.queue_paused()
    row.get_by_role("button", name="Resume").click()
    tab.flash_says("Queue emails resumed")
    expect(row.locator("[data-testid=state]")).to_contain_text("active")
    assert not client.queue_paused("emails")
    assert {client.get(i).status for i in waiting} == {JobStatus.PENDING}  # nobody serves it
    assert tab.dialogs == [] and tab.errors == []


def test_actions_need_the_token(
    client: BlockingClient, plugins: PluginManager, worker: Process, tab: Browser, tmp_path: Path
) -> None:
    flag = tmp_path / "gate"
    job_id = failed_job(client, plugins, flag)
    flag.unlink()

    # Not logged in: the page reads, but its Retry is refused and it says so.
    tab.open(f"/jobs/{job_id}")
    tab.settled()
    tab.tab.get_by_role("button", name="Retry").click()
    assert "Log in" in tab.flash_says("Not allowed")
    assert client.get(job_id).status is JobStatus.FAILED

    # A wrong token is refused on the login page.
    tab.log_in("not-the-token")
    assert "/login" in tab.tab.url
    assert tab.tab.locator("[role=alert]").is_visible()
    tab.open(f"/jobs/{job_id}")
    tab.settled()
    tab.tab.get_by_role("button", name="Retry").click()
    tab.flash_says("Not allowed")
    assert client.get(job_id).status is JobStatus.FAILED

    # The right one lets the same button through.
    tab.log_in()
    tab.open(f"/jobs/{job_id}")
    tab.settled()
    tab.tab.get_by_role("button", name="Retry").click()
    tab.flash_says("Retried")
    assert client.wait(job_id, timeout=60).status is JobStatus.COMPLETED
    assert tab.dialogs == [] and tab.errors == []


def test_log_out_ends_the_session(client: BlockingClient, tab: Browser) -> None:
    tab.log_in()
    tab.open("/")
    tab.settled()
    kept = tab.tab.context.cookies()
    tab.tab.get_by_role("button", name="Pause queue").click()
    tab.flash_says("paused")
    assert client.queue_paused()
    with tab.tab.expect_navigation():
        tab.tab.get_by_role("button", name="Log out").click()
    assert tab.tab.get_by_role("link", name="Log in").is_visible()
    # The session ended in the app: its cookies, put back, allow nothing.
    tab.tab.context.add_cookies(kept)
    tab.open("/")
    tab.settled()
    tab.tab.get_by_role("button", name="Resume queue").click()
    tab.flash_says("Not allowed")
    assert client.queue_paused()
    assert tab.dialogs == [] and tab.errors == []


def test_an_action_whose_button_is_swapped_out_while_it_runs_still_reports(
    client: BlockingClient, tab: Browser
) -> None:
    """A live refresh may replace the page's live part (and the button in it)
    while an action's request is under way: its answer is shown all the same."""
    tab.log_in()
    tab.open("/")
    tab.settled()
    # Swap the live part out the moment the action's request starts.
    tab.tab.evaluate(
        """() => document.addEventListener("htmx:beforeRequest", (event) => {
            if (!event.detail.elt.hasAttribute("data-done")) { return; }
            const region = document.getElementById("region");
            region.outerHTML = region.outerHTML;
        })"""
    )
    tab.tab.get_by_role("button", name="Pause queue").click()
    tab.flash_says("paused")
    assert client.queue_paused()
    assert tab.dialogs == [] and tab.errors == []


def test_a_big_argument_is_previewed_with_a_link_to_all_of_it(
    client: BlockingClient, plugins: PluginManager, tab: Browser, tmp_path: Path
) -> None:
    label = "x" * 60_000
    job_id = client.submit(gated(plugins, tmp_path / "never", label), delay=3600)
    tab.open("/jobs")
    cell = tab.tab.locator(f'tr[data-job="{job_id}"] .args').first.inner_text()
    assert len(cell) <= 201 and cell.endswith("…")
    tab.open(f"/jobs/{job_id}")
    shown = tab.tab.locator("[data-testid=job-args]").inner_text()
    assert 20_000 <= len(shown) <= 20_001 and shown.endswith("…")
    with tab.tab.expect_navigation():
        tab.tab.get_by_role("link", name="the whole value").click()
    assert tab.tab.url.endswith(f"/api/jobs/{job_id}/args")
    assert label in tab.tab.content()
    assert tab.dialogs == [] and tab.errors == []


def test_a_script_in_a_job_is_shown_as_text(
    client: BlockingClient, worker: Process, tab: Browser
) -> None:
    job_id = client.submit(
        build_job("email", {"to": XSS, "subject": "<img src=x onerror=alert(2)>", "latency": 0}),
        name=XSS,
    )
    client.wait(job_id, timeout=60)
    tab.open("/jobs")
    row = tab.tab.locator(f'tr[data-job="{job_id}"]')
    assert XSS in row.inner_text()
    tab.open(f"/jobs/{job_id}")
    assert tab.tab.locator("h1").inner_text() == XSS
    args = tab.tab.locator("[data-testid=job-args]").inner_text()
    assert XSS in args and "<img src=x onerror=alert(2)>" in args
    assert tab.tab.get_by_text(XSS).first.is_visible()
    injected = (
        "[...document.querySelectorAll('script, img')].filter(e => !e.src.includes('/static/'))"
    )
    assert tab.tab.evaluate(f"{injected}.length") == 0
    assert tab.dialogs == [] and tab.errors == []


def test_a_job_workers_refused_says_why_on_its_page(
    client: BlockingClient, store_url: str, plugins: PluginManager, tab: Browser, tmp_path: Path
) -> None:
    import asyncio
    import concurrent.futures

    from jobsched.store import StoreContext
    from jobsched_plugins.postgres_store import PostgresStore
    from jobsched_plugins.sqlite_store import SQLiteStore

    job_id = client.submit(gated(plugins, tmp_path / "never", "skewed"))

    async def refuse() -> None:
        # A worker of another release claims it and cannot build it.
        store = PostgresStore(store_url) if "postgres" in store_url else SQLiteStore(store_url)
        await store.open(StoreContext(worker_id="old-worker", shared=True))
        try:
            claimed, _ = await store.claim(5, "old-worker", types=["gated"], refuser="old-worker#1")
            assert [r.job_id for r in claimed] == [job_id]
            why = f"JobSpecError: job {job_id} (gated): unknown argument 'label'"
            assert await store.refuse([(job_id, why)], "old-worker", "old-worker#1", 5) == []
        finally:
            await store.close()

    # On a thread of its own: the browser's driver runs an event loop on this one.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, refuse()).result(timeout=60)
    tab.open(f"/jobs/{job_id}")
    expect(tab.tab.locator("[data-testid=job-status]")).to_contain_text("pending")
    expect(tab.tab.get_by_text("waiting for a worker that can build it")).to_be_visible()
    panel = tab.tab.locator("[data-testid=job-refusals]")
    expect(panel).to_contain_text("by 1 worker that could not build it from its arguments")
    expect(panel).to_contain_text("unknown argument 'label'")
    assert tab.dialogs == [] and tab.errors == []

"""A real Prometheus scraping a real worker, graphed: docs/observability-prometheus.png.

``python -m benchmarks.prometheus_screenshot`` starts ``jobsched worker
--metrics-port 0`` on a SQLite store, a ``prometheus`` server (``apt-get install
prometheus``; not needed by the tests or CI) scraping it every second, feeds
the worker jobs that complete, fail, are retried and time out for a while, and
then has Debian's chromium (``/usr/bin/chromium``, driven by Playwright) open
Prometheus's own expression browser (Debian's build serves its classic UI)
on the key queries of docs/grafana-dashboard.json and save a screenshot.
Every query of the dashboard is also run on the server and printed with the
number of series it returned. It is Prometheus's rendering
of the queries, not Grafana's: no Grafana server could be installed where this
was written.
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from jobsched import Client, Submission, build_job

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = ROOT / "docs" / "observability-prometheus.png"
CHROMIUM = "/usr/bin/chromium"

DASHBOARD = ROOT / "docs" / "grafana-dashboard.json"
#: The dashboard queries graphed in the screenshot: (panel title, which of its
#: queries). Every panel's queries are checked against the server, graphed or not.
GRAPHED = (
    ("Jobs finished per second, by status", 0),
    ("Queue depth in the store, by status", 0),
    ("Queue wait p50 / p95 (due to start)", 1),
    ("Attempt duration p95, by type", 0),
    ("Worker utilisation", 0),
    ("Retries, misfires and limits per second", 0),
    ("Backlog age: the oldest due job's wait", 0),
    ("Failed attempts per second, by error type", 0),
)


def dashboard_queries() -> list[tuple[str, str]]:
    """Every (panel title, PromQL) of the dashboard, its ``$type`` variable set to all."""
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return [
        (panel["title"], target["expr"].replace("$type", ".*"))
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _worker(url: str) -> Iterator[int]:
    """``jobsched worker --metrics-port 0``; yields the port its /metrics serves on."""
    command = [sys.executable, "-m", "jobsched", "worker", "--store", url, "--workers", "4"]
    proc = subprocess.Popen(
        [*command, "--metrics-port", "0"], stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        assert proc.stderr is not None
        port = None
        for line in proc.stderr:
            found = re.search(r"metrics on http://[^:]+:(\d+)/metrics", line)
            if found:
                port = int(found.group(1))
            if "shared scheduler started" in line and port is not None:
                threading.Thread(target=proc.stderr.read, daemon=True).start()
                break
        else:
            raise SystemExit(f"the worker exited with {proc.wait()} before it started")
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=120)


@contextmanager
def _store_exporter(url: str) -> Iterator[int]:
    """``/metrics`` serving the latest ``jobsched status --store URL --metrics``.

    What node-exporter's textfile collector serves in docs/observability.md's
    cron example, without node-exporter: the cluster view, from the store. A
    thread reruns the command (a second or so: a new process) back to back,
    so a scrape never waits for it.
    """
    latest = [b""]
    stop = threading.Event()

    def refresh() -> None:
        command = [sys.executable, "-m", "jobsched", "status", "--store", url, "--metrics"]
        while not stop.is_set():
            run = subprocess.run(command, capture_output=True, check=False, cwd=ROOT)
            if run.returncode == 0:
                latest[0] = run.stdout
            stop.wait(1)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(latest[0])

        def log_message(self, *args: object) -> None:
            pass  # Prometheus scrapes it every few seconds: no line each time

    refresher = threading.Thread(target=refresh, daemon=True)
    refresher.start()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        stop.set()
        refresher.join()


@contextmanager
def _prometheus(binary: str, worker_port: int, store_port: int, folder: Path) -> Iterator[str]:
    """A Prometheus server scraping the worker every second and the store every 5; its URL."""
    config = folder / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n"
        "  - job_name: jobsched-worker\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{worker_port}']\n"
        "  - job_name: jobsched-store\n    scrape_interval: 5s\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{store_port}']\n",
        encoding="utf-8",
    )
    port = _free_port()
    log = (folder / "prometheus.log").open("w", encoding="utf-8")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:  # poll only at start-up: Prometheus has no ready signal but its endpoint
            try:
                with urllib.request.urlopen(f"{base}/-/ready", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"prometheus did not start: see {folder / 'prometheus.log'}")
            time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()


def _batch(round_: int, size: int) -> list[Submission]:
    """A mix like the end-to-end test's: most complete, some fail, retry or time out."""
    jobs = []
    for i in range(size):
        kind = (round_ * size + i) % 10
        name = f"r{round_}-{i}"
        if kind == 0:
            job = build_job("flaky-upload", {"path": name, "failures": 1})
            jobs.append(Submission(job, retry={"policy": "fixed", "seconds": 0, "max_retries": 1}))
        elif kind == 1:
            job = build_job("flaky-upload", {"path": name, "failures": 9})
            jobs.append(Submission(job, retry="none"))
        elif kind == 2:
            job = build_job("sleep", {"name": name, "seconds": 3600})
            jobs.append(Submission(job, timeout=0.2, retry="none"))
        else:
            seconds = 0.01 * (1 + (i % 7))
            jobs.append(Submission(build_job("sleep", {"name": name, "seconds": seconds})))
    return jobs


async def _feed(url: str, seconds: float) -> int:
    """Submit a batch every second for `seconds`, bigger in the middle; returns the count."""
    submitted = 0
    rounds = int(seconds)
    async with Client(url) as client:
        for round_ in range(rounds):
            size = 20 + 60 * min(round_, rounds - round_) // max(rounds // 2, 1)
            submitted += len(await client.submit_many(_batch(round_, size)))
            await asyncio.sleep(1)
    return submitted


def _graph_url(base: str, queries: list[tuple[str, str]], range_seconds: int) -> str:
    params: dict[str, str] = {}
    for i, (_, expr) in enumerate(queries):
        params.update(
            {
                f"g{i}.expr": expr,
                f"g{i}.tab": "0",  # the graph tab
                f"g{i}.range_input": f"{range_seconds}s",
            }
        )
    return f"{base}/classic/graph?{urllib.parse.urlencode(params)}"


def _query(base: str, expr: str) -> list[dict[str, object]]:
    """An instant query's result; a query Prometheus refuses raises SystemExit."""
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            body = json.load(response)
    except urllib.error.HTTPError as exc:
        raise SystemExit(f"prometheus refused {expr!r}: {exc.read().decode()}") from exc
    return list(body["data"]["result"])


def _check_queries(base: str, queries: list[tuple[str, str]]) -> list[str]:
    """Run every dashboard query on the live server: one line each, series found."""
    lines = []
    for title, expr in queries:
        found = _query(base, expr)
        lines.append(f"{len(found):3} series  {title}: {expr}")
    return lines


def _screenshot(url: str, panels: int, output: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            # A full-page screenshot would paint the fixed navigation bar mid-page.
            page.add_style_tag(content=".navbar { position: static !important; }")
            # Every panel drawn: one plot canvas per query.
            # Debian's build serves Prometheus's classic UI: a Rickshaw SVG per graph.
            page.wait_for_function(
                f"document.querySelectorAll('.rickshaw_graph svg path').length >= {panels}",
                timeout=60_000,
            )
            page.wait_for_load_state("networkidle")
            output.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(output), full_page=True)
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.prometheus_screenshot",
        description="Graph a real worker's metrics in a real Prometheus and screenshot it.",
    )
    parser.add_argument("--seconds", type=float, default=120, help="how long to feed jobs")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--prometheus", default=shutil.which("prometheus") or "prometheus")
    args = parser.parse_args(argv)
    if shutil.which(args.prometheus) is None:
        parser.error(f"no prometheus binary at {args.prometheus!r} (apt-get install prometheus)")
    if not Path(CHROMIUM).exists():
        parser.error(f"{CHROMIUM} is missing (apt-get install chromium)")
    queries = dashboard_queries()
    graphed = [[(t, expr) for t, expr in queries if t == title][index] for title, index in GRAPHED]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        url = f"sqlite:///{folder}/jobs.db"
        with (
            _worker(url) as worker_port,
            _store_exporter(url) as store_port,
            _prometheus(args.prometheus, worker_port, store_port, folder) as base,
        ):
            submitted = asyncio.run(_feed(url, args.seconds))
            time.sleep(5)  # the last jobs finish and are scraped
            finished = _query(base, "sum(jobsched_jobs_total)")
            if not finished:
                raise SystemExit("prometheus has no jobsched_jobs_total: the scrape failed")
            print(
                f"submitted {submitted} jobs; prometheus saw {finished[0]['value'][1]} finish",
                file=sys.stderr,
            )
            print("\n".join(_check_queries(base, queries)))
            _screenshot(
                _graph_url(base, graphed, int(args.seconds) + 30), len(graphed), args.output
            )
    print(f"written to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

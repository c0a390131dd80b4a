"""The HTML pages: overview, jobs, job detail, schedules, queues, limits, workers.

Each page reads the operator API (`Client` or `LocalClient`) and renders a
template (``templates/<page>.html``). A request from htmx (``HX-Request``)
gets only the page's live fragment (``templates/_<page>.html``, the element
``#region``), which the page asks for again whenever the event stream says
something changed, and which its filters replace.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from jobsched import (
    OVERDUE_AFTER,
    WORKER_STATES,
    JobStatus,
    LocalClient,
    UnknownJobError,
    job_types,
)
from jobsched.store import MissingRoleError

from . import _params, _views, _workflow
from ._bulk import BULK_CAP
from ._health import StoreUnavailable
from ._http import shown
from ._params import MAX_OFFSET, BadRequest
from ._state import dashboard
from ._workflow import read_workflow, workflow_graph

Page = Callable[[Request], Awaitable[Response]]

#: Jobs per page of the job list.
PAGE_SIZE = 50
#: The last runs the schedules page shows of each schedule (one bounded
#: read per schedule: `OperatorAPI.schedule_runs`).
LAST_RUNS = 5
#: Terminal statuses, for the overview's "recently finished".
FINISHED = ("completed", "failed", "timed_out", "cancelled")


def page_routes() -> list[BaseRoute]:
    """The pages' routes (the login page is the app's own)."""
    return [
        Route("/", _guarded(overview), methods=["GET"], name="overview"),
        Route("/jobs", _guarded(jobs), methods=["GET"], name="jobs"),
        Route("/jobs/{job_id:path}", _guarded(job), methods=["GET"], name="job"),
        Route("/schedules", _guarded(schedules), methods=["GET"], name="schedules"),
        Route("/queues", _guarded(queues), methods=["GET"], name="queues"),
        Route("/limits", _guarded(limits), methods=["GET"], name="limits"),
        Route("/workers", _guarded(workers), methods=["GET"], name="workers"),
    ]


def _guarded(page: Page) -> Page:
    """`page` within the store's deadline: a page saying so (503) while the store is down."""

    @functools.wraps(page)
    async def endpoint(request: Request) -> Response:
        try:
            return await dashboard(request).health.call(page(request))
        except StoreUnavailable as exc:
            problem = _problem(request, "The store is unavailable", f"{exc}.", 503)
            problem.headers.update(exc.headers)
            return problem

    return endpoint


def _render(
    request: Request, template: str, context: dict[str, Any], status: int = 200
) -> Response:
    board = dashboard(request)
    values = {"now": time.time(), "statuses": _views.STATUSES, "live": True, **context}
    return board.templates.TemplateResponse(request, template, values, status_code=status)


def _show(request: Request, page: str, context: dict[str, Any]) -> Response:
    """The page, or only its live fragment when htmx asks."""
    fragment = request.headers.get("HX-Request") == "true"
    return _render(
        request, f"_{page}.html" if fragment else f"{page}.html", {"page": page, **context}
    )


def _problem(request: Request, title: str, message: str, status: int) -> Response:
    return _render(request, "error.html", {"title": title, "message": message}, status)


async def overview(request: Request) -> Response:
    client = dashboard(request).client
    try:
        window, job_type, queue = _params.history_query(request.query_params)
    except BadRequest as exc:
        return _problem(request, "Bad filter", str(exc), 400)
    stats = await client.stats()
    recent = await client.page(status=FINISHED, limit=8)
    try:
        history = await client.history(window=window, type=job_type, queue=queue)
        lacking = None
    except MissingRoleError as exc:
        history, lacking = None, str(exc)
    registry = await _registry(client)
    # The filters offer the types and queues the history names and those
    # the workers registered (and keep the one chosen).
    types = {t.type for t in history.types} if history is not None else set()
    types.update(t for w in registry or () for t in w.job_types)
    queues = {q.name for q in history.queues} if history is not None else set()
    queues.update(q for w in registry or () for q in w.queues)
    context = {
        "title": "Overview",
        "stats": stats,
        "registry": registry,
        "chart": _views.throughput_chart(stats.throughput),
        "recent": recent.jobs,
        "history": history,
        "history_lacking": lacking,
        "history_chart": None
        if history is None
        else _views.throughput_chart(history.buckets, step=history.step),
        "filters": {"window": window, "type": job_type, "queue": queue},
        "type_options": sorted(types | ({job_type} if job_type else set())),
        "queue_options": sorted(queues | ({queue} if queue else set())),
        "windows": {"24h": "24 hours", "7d": "7 days", "1h": "1 hour"},
    }
    return _show(request, "overview", context)


async def jobs(request: Request) -> Response:
    client = dashboard(request).client
    query = request.query_params
    status = query.get("status") or None
    if status is not None and status not in _views.STATUSES:
        known = ", ".join(_views.STATUSES)
        return _problem(
            request, "Bad filter", f"unknown status {shown(status)} (known: {known})", 400
        )
    try:
        job_type = _params.text(query, "type")
        text = _params.text(query, "q")
        offset = _params.integer(query, "offset", 0, 0, MAX_OFFSET)
    except BadRequest as exc:
        return _problem(request, "Bad request", str(exc), 400)
    page = await client.page(status=status, type=job_type, q=text, limit=PAGE_SIZE, offset=offset)
    filters = {"status": status, "type": job_type, "q": text}

    def link(at: int) -> str:
        params = {k: v for k, v in filters.items() if v}
        if at:
            params["offset"] = str(at)
        return f"{request.url.path}?{urlencode(params)}" if params else request.url.path

    context = {
        "title": "Jobs",
        "page": page,
        "filters": filters,
        "offset": offset,
        "prev_url": link(max(offset - PAGE_SIZE, 0)) if offset > 0 else None,
        "next_url": link(offset + PAGE_SIZE) if offset + PAGE_SIZE < page.total else None,
        "types": _views.unique(sorted(j.type for j in page.jobs)),
        "bulk_cap": BULK_CAP,
    }
    return _show(request, "jobs", context)


async def job(request: Request) -> Response:
    client = dashboard(request).client
    try:
        job_id = _params.path_value(request.path_params, "job_id")
    except BadRequest as exc:
        return _problem(request, "Bad request", str(exc), 400)
    try:
        found = await client.get(job_id)
    except UnknownJobError:
        return _problem(request, "No such job", f"No job has the id {shown(job_id)}.", 404)
    context = {
        "title": _views.clip(found.name or found.type),
        "job": found,
        "no_worker": await _no_worker(client, found),
        "progress": _views.progress_view(found.progress),
        "graph": await _graph(client, found),
        "max_workflow": _workflow.MAX_WORKFLOW,
        "retryable": _views.RETRYABLE,
        "cancellable": _views.CANCELLABLE,
    }
    return _show(request, "job", context)


async def schedules(request: Request) -> Response:
    board = dashboard(request)
    plugins = board.plugin_manager()

    def resolve(name: str) -> Any:
        return plugins.resolve("triggers", name)

    client = board.client
    rows: list[dict[str, Any]] = [
        {
            "schedule": schedule,
            "trigger": _views.describe_trigger(schedule.trigger),
            "fires": _views.next_fires(schedule.trigger, schedule.next_run, resolve),
            "runs": await client.schedule_runs(schedule.schedule_id, LAST_RUNS),
            "editable": schedule.active and "trigger" not in schedule.trigger,
        }
        for schedule in await client.schedules()
    ]
    context: dict[str, Any] = {
        "title": "Schedules",
        "schedules": rows,
        "job_types": [t.name for t in job_types(plugins)],
        "overdue_after": OVERDUE_AFTER,
        "editing": None,
    }
    wanted = request.query_params.get("edit")
    if wanted is not None:
        found = [row for row in rows if row["schedule"].schedule_id == wanted]
        if not found or not found[0]["editable"]:
            message = f"No active schedule that can be edited has the id {shown(wanted)}."
            return _problem(request, "No such schedule", message, 404)
        context["editing"] = _views.edit_values(found[0]["schedule"])
    return _show(request, "schedules", context)


async def workers(request: Request) -> Response:
    client = dashboard(request).client
    registry = await _registry(client)
    stats = await client.stats()
    context = {
        "title": "Workers",
        "registry": registry,
        "states": {s: sum(1 for w in registry or () if w.state == s) for s in WORKER_STATES},
        "unserved": stats.unserved,
        # Drain and Stop reach the workers of a store; an in-process
        # scheduler is its program's to stop (`LocalClient.drain_worker`).
        "requests": not isinstance(client, LocalClient),
    }
    return _show(request, "workers", context)


async def _registry(client: Any) -> list[Any] | None:
    """The registry's workers; None for a store that keeps no registry."""
    try:
        found: list[Any] = await client.workers()
    except MissingRoleError:
        return None
    return found


async def _no_worker(client: Any, job: Any) -> bool:
    """Whether `job` is due and waits for a worker that knows its type (no
    live worker registered it: `Stats.unserved`)."""
    waiting = job.status in (JobStatus.PENDING, JobStatus.RETRY_WAIT)
    if not waiting or job.run_at > time.time():
        return False
    try:
        unserved = (await client.stats()).unserved
    except MissingRoleError:
        return False
    return bool(job.type in unserved)


async def queues(request: Request) -> Response:
    client = dashboard(request).client
    context = {
        "title": "Queues",
        "queues": await client.queues(),
        "all_paused": await client.queue_paused(),
    }
    return _show(request, "queues", context)


async def limits(request: Request) -> Response:
    stats = await dashboard(request).client.stats()
    return _show(request, "limits", {"title": "Limits", "limits": stats.limits})


async def _graph(client: Any, focus: Any) -> _views.Graph:
    """The whole workflow `focus` belongs to (at most `MAX_WORKFLOW` jobs), laid out."""
    return workflow_graph(await read_workflow(client, focus, _workflow.MAX_WORKFLOW))

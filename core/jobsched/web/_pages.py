"""The HTML pages: overview, jobs, job detail, schedules, limits.

Each page reads the operator API (`Client` or `LocalClient`) and renders a
template; a request from htmx (``HX-Request``) gets only the page's live
fragment (``_<page>.html``, the element ``#region``), which the page asks for
again whenever the event stream says something changed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from . import _views

#: Jobs per page of the job list.
PAGE_SIZE = 50
#: How many of the newest jobs the job page looks through for dependents.
DEPENDENT_SCAN = 2000


def page_routes(render: Callable[..., Response], client_of: Callable[[Request], Any]) -> list[Route]:
    """The page routes, rendering with `render(request, template, context, status)`
    and reading through `client_of(request)` (the app's open client)."""
    pages = _Pages(render, client_of)
    return [
        Route("/", pages.overview, name="overview"),
        Route("/jobs", pages.jobs, name="jobs"),
        Route("/jobs/{job_id:path}", pages.job, name="job"),
        Route("/schedules", pages.schedules, name="schedules"),
        Route("/limits", pages.limits, name="limits"),
    ]


class _Pages:
    def __init__(
        self, render: Callable[..., Response], client_of: Callable[[Request], Any]
    ) -> None:
        self.render = render
        self.client_of = client_of

    def _show(self, request: Request, page: str, context: dict[str, Any]) -> Response:
        fragment = request.headers.get("HX-Request") == "true"
        template = f"_{page}.html" if fragment else f"{page}.html"
        return self.render(request, template, {"page": page, **context})

    async def overview(self, request: Request) -> Response:
        client = self.client_of(request)
        stats, recent = await asyncio.gather(
            client.stats(),
            client.page(status=("completed", "failed", "timed_out", "cancelled"), limit=8),
        )
        context = {
            "title": "Overview",
            "stats": stats,
            "chart": _views.throughput_chart(stats.throughput),
            "recent": recent.jobs,
        }
        return self._show(request, "overview", context)

    async def jobs(self, request: Request) -> Response:
        client = self.client_of(request)
        query = request.query_params
        status = query.get("status") or None
        if status is not None and status not in _views.STATUSES:
            return self.render(
                request,
                "error.html",
                {"title": "Bad filter", "message": f"unknown status {status!r}"},
                400,
            )
        job_type = query.get("type") or None
        text = query.get("q") or None
        offset = _int(query.get("offset"), 0)
        page = await client.page(
            status=status, type=job_type, q=text, limit=PAGE_SIZE, offset=offset
        )
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
            "here": link(offset),
            "prev_url": link(max(offset - PAGE_SIZE, 0)) if offset > 0 else None,
            "next_url": link(offset + PAGE_SIZE) if offset + PAGE_SIZE < page.total else None,
            "types": _views.unique(sorted(job.type for job in page.jobs)),
        }
        return self._show(request, "jobs", context)

    async def job(self, request: Request) -> Response:
        from .. import UnknownJobError

        client = self.client_of(request)
        job_id = request.path_params["job_id"]
        try:
            job = await client.get(job_id)
        except UnknownJobError:
            return self.render(
                request,
                "error.html",
                {"title": "No such job", "message": f"No job has the id {job_id!r}."},
                404,
            )
        neighbourhood = await _neighbourhood(client, job)
        context = {
            "title": job.name or job.type,
            "job": job,
            "progress": _views.progress_view(job.progress),
            "graph": _views.dependency_graph(job, neighbourhood),
            "retryable": _views.RETRYABLE,
            "cancellable": _views.CANCELLABLE,
        }
        return self._show(request, "job", context)

    async def schedules(self, request: Request) -> Response:
        client = self.client_of(request)
        resolve = _trigger_resolver(request)
        rows = [
            {
                "schedule": schedule,
                "trigger": _views.describe_trigger(schedule.trigger),
                "fires": _views.next_fires(schedule.trigger, schedule.next_run, resolve),
            }
            for schedule in await client.schedules()
        ]
        return self._show(request, "schedules", {"title": "Schedules", "schedules": rows})

    async def limits(self, request: Request) -> Response:
        stats = await self.client_of(request).stats()
        return self._show(request, "limits", {"title": "Limits", "limits": stats.limits})


def _int(text: str | None, default: int) -> int:
    try:
        return max(int(text), 0) if text else default
    except ValueError:
        return default


async def _neighbourhood(client: Any, job: Any) -> Mapping[str, Any]:
    """The job, what it depends on (two levels), and its dependents (two levels).

    Dependencies come from ``depends_on``; dependents are found among the
    `DEPENDENT_SCAN` newest jobs submitted since it (a dependent is always
    submitted after what it depends on).
    """
    from .. import UnknownJobError

    known: dict[str, Any] = {job.job_id: job}
    frontier = list(job.depends_on)
    for _ in range(2):
        nxt: list[str] = []
        for dep in frontier:
            if dep in known:
                continue
            try:
                found = await client.get(dep)
            except UnknownJobError:
                continue
            known[dep] = found
            nxt.extend(found.depends_on)
        frontier = nxt
    newer: list[Any] = []
    offset = 0
    while offset < DEPENDENT_SCAN:
        page = await client.page(limit=200, offset=offset)
        newer.extend(j for j in page.jobs if j.submitted_at >= job.submitted_at)
        if not page.jobs or page.jobs[-1].submitted_at < job.submitted_at:
            break
        offset += len(page.jobs)
    wanted = {job.job_id}
    for _ in range(2):
        children = [j for j in newer if wanted & set(j.depends_on) and j.job_id not in known]
        for child in children:
            known[child.job_id] = child
        wanted = {child.job_id for child in children}
        if not wanted:
            break
    return known


def _trigger_resolver(request: Request) -> Callable[[str], Any]:
    """``resolve(name)``: the trigger factory registered as `name` (cron, date, ...)."""
    plugins = getattr(request.app.state, "plugins", None)
    if plugins is None:
        from .. import PluginManager

        plugins = request.app.state.plugins = PluginManager()
    return lambda name: plugins.resolve("triggers", name)


def common_context(request: Request) -> dict[str, Any]:
    """What every template may use besides its page's own values."""
    return {
        "now": time.time(),
        "statuses": _views.STATUSES,
    }


def install_filters(env: Any) -> None:
    """The template filters the pages use, on the Jinja2 environment `env`."""
    env.filters.update(
        when=_views.when,
        iso=_views.iso,
        ago=_views.ago,
        duration=_views.duration,
        pretty_json=_views.pretty_json,
        compact_json=_views.compact_json,
        status_name=_views.status_name,
        progress_view=_views.progress_view,
        limit_percent=_views.limit_percent,
    )

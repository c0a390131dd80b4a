"""The JSON API: ``/api/...`` routes over the operator API of a client.

Every answer is JSON. An error is ``{"error": "one line"}`` with 400 (bad
query), 401/403 (not allowed, see `jobsched.web._auth`), 404 (unknown job or
schedule), 409 (the job is not in a status the action applies to) or 501
(the store lacks the role a route needs, e.g. ``history``).
Records keep the field names of their Python classes (`jobsched.JobInfo`,
`jobsched.Stats`, `jobsched.ScheduleInfo`).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from jobsched import (
    InvalidTransitionError,
    JobSpecError,
    JobStatus,
    UnknownJobError,
    UnknownScheduleError,
    check_queue,
)
from jobsched.store import MissingRoleError, StoreOwnedError

from . import _params
from ._deps import dependents, upstream
from ._health import StoreUnavailable
from ._http import shown
from ._json import to_json
from ._params import MAX_OFFSET, BadRequest
from ._state import Dashboard, dashboard

#: The most jobs one ``GET /api/jobs`` returns.
MAX_LIMIT = 500
DEFAULT_LIMIT = 50
STATUSES = tuple(s.value for s in JobStatus)


class ApiError(Exception):
    """An answer other than 200: its HTTP status and one line saying why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def error_response(
    status: int, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


Handler = Callable[[Request, Dashboard], Awaitable[Any]]


def _answer(handler: Handler, *, changes: bool) -> Callable[[Request], Awaitable[Response]]:
    """An endpoint answering `handler`'s data as JSON, its errors as ``{"error"}``.

    `changes`: the request changes state, so it must be allowed by the auth.
    """

    @functools.wraps(handler)
    async def endpoint(request: Request) -> Response:
        board = dashboard(request)
        if changes:
            refusal = board.auth.refusal(request)
            if refusal is not None:
                return error_response(refusal.status, refusal.reason)
        try:
            for name in request.path_params:
                _params.path_value(request.path_params, name)
            data = await board.health.call(handler(request, board))
        except StoreUnavailable as exc:
            return error_response(503, str(exc), exc.headers)
        except ApiError as exc:
            return error_response(exc.status, exc.message)
        except BadRequest as exc:
            return error_response(400, str(exc))
        except UnknownJobError:
            return error_response(404, f"unknown job {_named(request, 'job_id')}")
        except UnknownScheduleError:
            return error_response(404, f"unknown schedule {_named(request, 'schedule_id')}")
        except (InvalidTransitionError, JobSpecError, StoreOwnedError) as exc:
            # A job that cannot be built or moved from what the store holds,
            # or a file a running process owns: the request is fine, the
            # stored state does not allow it now.
            return error_response(409, str(exc))
        return JSONResponse(data)

    return endpoint


def _named(request: Request, name: str) -> str:
    """The path value `name` as an error message shows it (cut short)."""
    return shown(request.path_params.get(name, ""))


def _statuses(request: Request) -> list[str] | None:
    """``status=failed&status=cancelled`` or ``status=failed,cancelled``; None: all."""
    wanted = [
        s.strip() for given in request.query_params.getlist("status") for s in given.split(",")
    ]
    for status in wanted:
        if status not in STATUSES:
            raise ApiError(400, f"unknown status {shown(status)} (one of {', '.join(STATUSES)})")
    return wanted or None


async def stats(request: Request, board: Dashboard) -> Any:
    return to_json(await board.client.stats())


async def history(request: Request, board: Dashboard) -> Any:
    """`Client.history`: throughput over a window, per job type, and the backlog."""
    window, job_type, queue = _params.history_query(request.query_params)
    try:
        found = await board.client.history(window=window, type=job_type, queue=queue)
    except MissingRoleError as exc:
        raise ApiError(501, str(exc)) from None
    return to_json(found)


async def workers(request: Request, board: Dashboard) -> Any:
    """The worker registry; ``registry: false`` (and no workers) for a store without one."""
    try:
        found = await board.client.workers()
    except MissingRoleError:
        return {"workers": [], "registry": False}
    return {"workers": to_json(found), "registry": True}


async def jobs(request: Request, board: Dashboard) -> Any:
    query = request.query_params
    limit = _params.integer(query, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    offset = _params.integer(query, "offset", 0, 0, MAX_OFFSET)
    page = await board.client.page(
        status=_statuses(request),
        type=_params.text(query, "type"),
        q=_params.text(query, "q"),
        limit=limit,
        offset=offset,
    )
    listed = []
    for info in page.jobs:
        row = to_json(info)
        del row["result"]  # can be large: GET /api/jobs/{id} has it
        listed.append(row)
    return {"jobs": listed, "total": page.total, "limit": limit, "offset": offset}


async def job(request: Request, board: Dashboard) -> Any:
    info = await board.client.get(request.path_params["job_id"])
    detail = to_json(info)
    above = await upstream(board.client, info)
    detail["upstream"] = [
        _brief(found) if found is not None else _purged(job_id)
        for job_id, found in zip(info.depends_on, above, strict=True)
    ]
    below, _ = await dependents(board.client, info)
    detail["downstream"] = [_brief(found) for found in below]
    return detail


async def job_args(request: Request, board: Dashboard) -> Any:
    """A job's arguments alone (the job page shows their first characters)."""
    return to_json((await board.client.get(request.path_params["job_id"])).args)


async def job_result(request: Request, board: Dashboard) -> Any:
    """A job's result alone (null until it completed, or once it expired)."""
    return to_json((await board.client.get(request.path_params["job_id"])).result)


def _brief(info: Any) -> dict[str, Any]:
    status = info.status.value
    return {"job_id": info.job_id, "type": info.type, "name": info.name, "status": status}


def _purged(job_id: str) -> dict[str, Any]:
    return {"job_id": job_id, "type": None, "name": None, "status": None}


async def retry(request: Request, board: Dashboard) -> Any:
    return to_json(await board.client.retry(request.path_params["job_id"]))


async def cancel(request: Request, board: Dashboard) -> Any:
    job_id = request.path_params["job_id"]
    if not await board.client.cancel(job_id):
        info = await board.client.get(job_id)
        raise ApiError(409, f"job {job_id!r} already finished ({info.status.value})")
    return to_json(await board.client.get(job_id))


async def schedules(request: Request, board: Dashboard) -> Any:
    return {"schedules": to_json(await board.client.schedules())}


async def pause_schedule(request: Request, board: Dashboard) -> Any:
    schedule_id = request.path_params["schedule_id"]
    changed = await board.client.pause_schedule(schedule_id)
    return {"schedule_id": schedule_id, "paused": True, "changed": changed}


async def resume_schedule(request: Request, board: Dashboard) -> Any:
    schedule_id = request.path_params["schedule_id"]
    changed = await board.client.resume_schedule(schedule_id)
    return {"schedule_id": schedule_id, "paused": False, "changed": changed}


async def trigger_schedule(request: Request, board: Dashboard) -> Any:
    schedule_id = request.path_params["schedule_id"]
    return {"schedule_id": schedule_id, "job_id": await board.client.trigger_schedule(schedule_id)}


async def pause_queue(request: Request, board: Dashboard) -> Any:
    return {"queue_paused": True, "changed": await board.client.pause_queue()}


async def resume_queue(request: Request, board: Dashboard) -> Any:
    return {"queue_paused": False, "changed": await board.client.resume_queue()}


async def queues(request: Request, board: Dashboard) -> Any:
    client = board.client
    return {"queues": to_json(await client.queues()), "all_paused": await client.queue_paused()}


def _queue_name(request: Request) -> str:
    try:
        return check_queue(request.path_params["name"])
    except ValueError as exc:
        raise BadRequest(str(exc)) from None


async def pause_named_queue(request: Request, board: Dashboard) -> Any:
    name = _queue_name(request)
    return {"queue": name, "paused": True, "changed": await board.client.pause_queue(name)}


async def resume_named_queue(request: Request, board: Dashboard) -> Any:
    name = _queue_name(request)
    return {"queue": name, "paused": False, "changed": await board.client.resume_queue(name)}


async def healthz(request: Request) -> Response:
    """``{"status": "ok", "read_only": ...}`` when the store answers (within
    `StoreHealth.probe_timeout`), else 503 with ``"status": "unavailable"`` and why."""
    board = dashboard(request)
    error = await board.health.probe(board.client.queue_paused())
    if error is None:
        return JSONResponse({"status": "ok", "read_only": board.auth.read_only})
    body = {"status": "unavailable", "read_only": board.auth.read_only, "error": error}
    return JSONResponse(body, status_code=503)


def api_routes() -> list[BaseRoute]:
    """The JSON API's routes (``/healthz`` included), named for ``url(...)`` in templates."""

    def get(path: str, handler: Handler, name: str) -> Route:
        return Route(path, _answer(handler, changes=False), methods=["GET"], name=name)

    def post(path: str, handler: Handler, name: str) -> Route:
        return Route(path, _answer(handler, changes=True), methods=["POST"], name=name)

    return [
        Route("/healthz", healthz, methods=["GET"], name="healthz"),
        get("/api/stats", stats, "api_stats"),
        get("/api/workers", workers, "api_workers"),
        get("/api/history", history, "api_history"),
        get("/api/jobs", jobs, "api_jobs"),
        get("/api/jobs/{job_id}", job, "api_job"),
        get("/api/jobs/{job_id}/args", job_args, "api_job_args"),
        get("/api/jobs/{job_id}/result", job_result, "api_job_result"),
        post("/api/jobs/{job_id}/retry", retry, "api_job_retry"),
        post("/api/jobs/{job_id}/cancel", cancel, "api_job_cancel"),
        get("/api/schedules", schedules, "api_schedules"),
        post("/api/schedules/{schedule_id}/pause", pause_schedule, "api_schedule_pause"),
        post("/api/schedules/{schedule_id}/resume", resume_schedule, "api_schedule_resume"),
        post("/api/schedules/{schedule_id}/trigger", trigger_schedule, "api_schedule_trigger"),
        post("/api/queue/pause", pause_queue, "api_queue_pause"),
        post("/api/queue/resume", resume_queue, "api_queue_resume"),
        get("/api/queues", queues, "api_queues"),
        post("/api/queues/{name}/pause", pause_named_queue, "api_named_queue_pause"),
        post("/api/queues/{name}/resume", resume_named_queue, "api_named_queue_resume"),
    ]

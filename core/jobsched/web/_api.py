"""The JSON API: ``/api/...`` routes over the operator API of a client.

Every answer is JSON. An error is ``{"error": "one line"}`` with 400 (bad
query), 401/403 (not allowed, see `jobsched.web._auth`), 404 (unknown job,
schedule or worker), 409 (the job is not in a status the action applies to;
a worker the client cannot ask) or 501 (the store lacks the role a route
needs, e.g. ``history``).
Records keep the field names of their Python classes (`jobsched.JobInfo`,
`jobsched.Stats`, `jobsched.ScheduleInfo`). The bulk actions
(``POST /api/jobs/bulk/{action}``) are `jobsched.web._bulk`'s.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from jobsched import (
    InvalidTransitionError,
    JobSpecError,
    JobStatus,
    SchedulerError,
    UnknownJobError,
    UnknownScheduleError,
    UnknownWorkerError,
    check_queue,
)
from jobsched.store import MissingRoleError, StoreError, StoreOwnedError

from . import _params
from ._access import acted, action_route
from ._bulk import bulk
from ._deps import dependents, upstream
from ._health import StoreUnavailable
from ._http import shown
from ._json import to_json
from ._params import MAX_OFFSET, BadRequest
from ._schedule_form import FormErrors, check_create, check_edit
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


def _answer(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """An endpoint answering `handler`'s data as JSON, its errors as ``{"error"}``.

    Who may call it is not its business: an action's is an `ActionRoute`'s
    (`post` below), which checks and audits every request first.
    """

    @functools.wraps(handler)
    async def endpoint(request: Request) -> Response:
        board = dashboard(request)
        try:
            for name in request.path_params:
                _params.path_value(request.path_params, name)
            data = await board.health.call(handler(request, board))
        except StoreUnavailable as exc:
            return error_response(503, str(exc), exc.headers)
        except ApiError as exc:
            return error_response(exc.status, exc.message)
        except FormErrors as exc:
            return _form_error(exc)
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


async def drain_worker(request: Request, board: Dashboard) -> Any:
    return await _ask_worker(request, board, "drain")


async def stop_worker(request: Request, board: Dashboard) -> Any:
    return await _ask_worker(request, board, "stop")


async def _ask_worker(request: Request, board: Dashboard, command: str) -> Any:
    """An operator's request to a worker (`Client.drain_worker`, `stop_worker`):
    404 for a worker no live one has the id of, 409 where the client cannot
    ask (a store without the workers role; an in-process scheduler)."""
    worker_id = request.path_params["worker_id"]
    if not worker_id:
        raise BadRequest("worker_id must not be empty")
    ask = board.client.drain_worker if command == "drain" else board.client.stop_worker
    try:
        await ask(worker_id)
    except UnknownWorkerError as exc:
        raise ApiError(404, str(exc)) from None
    except MissingRoleError as exc:
        raise ApiError(409, str(exc)) from None
    except StoreError:
        raise
    except SchedulerError as exc:  # LocalClient: its program starts and stops its scheduler
        raise ApiError(409, str(exc)) from None
    acted(request, 1)
    return {"worker_id": worker_id, "command": command}


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
    detail["downstream"] = [_brief(found) for found in await dependents(board.client, info)]
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


async def _fields(request: Request) -> dict[str, Any]:
    """The request's fields: a JSON object, or a urlencoded form (the page's)."""
    body = await request.body()
    if request.headers.get("content-type", "").startswith("application/json"):
        try:
            data = json.loads(body or b"null")
        except ValueError as exc:
            raise ApiError(400, f"the body is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ApiError(400, "the body must be a JSON object of the schedule's fields")
        return data
    try:
        form = parse_qs(body.decode("utf-8", "replace"), max_num_fields=20)
    except ValueError:
        raise ApiError(400, "the form has too many fields") from None
    return {name: values[0] for name, values in form.items()}


def _form_error(exc: FormErrors) -> JSONResponse:
    """400 with every bad field: ``{"error": "args: ...; every: ...", "errors": {field: line}}``."""
    return JSONResponse({"error": str(exc), "errors": exc.errors}, status_code=400)


async def create_schedule(request: Request, board: Dashboard) -> Any:
    """A new schedule of a registered job type, on a cron rule or an interval."""
    new = check_create(await _fields(request), board.plugin_manager())
    rule = new.rule
    try:
        schedule_id = await board.client.add_schedule(
            new.job, every=rule.every, trigger=rule.trigger
        )
    except (ValueError, TypeError) as exc:
        raise ApiError(400, str(exc)) from None
    acted(request, 1)
    return {"schedule_id": schedule_id}


async def edit_schedule(request: Request, board: Dashboard) -> Any:
    """New arguments or a new rule for a schedule; its id changes with them
    (``Client.update_schedule``): the answer names the new one."""
    schedule_id = request.path_params["schedule_id"]
    fields = await _fields(request)
    found = [s for s in await board.client.schedules() if s.schedule_id == schedule_id]
    if not found:
        raise UnknownScheduleError(schedule_id)
    edit = check_edit(fields, found[0].type, found[0].queue, board.plugin_manager())
    rule = edit.rule
    try:
        new_id = await board.client.update_schedule(
            schedule_id,
            args=edit.args,
            every=None if rule is None else rule.every,
            trigger=None if rule is None else rule.trigger,
        )
    except (ValueError, TypeError) as exc:  # an ended schedule, or one made in code
        raise ApiError(409, str(exc)) from None
    return {"schedule_id": new_id, "replaced": None if new_id == schedule_id else schedule_id}


async def pause_schedule(request: Request, board: Dashboard) -> Any:
    schedule_id = request.path_params["schedule_id"]
    changed = await board.client.pause_schedule(schedule_id)
    acted(request, int(changed))
    return {"schedule_id": schedule_id, "paused": True, "changed": changed}


async def resume_schedule(request: Request, board: Dashboard) -> Any:
    schedule_id = request.path_params["schedule_id"]
    changed = await board.client.resume_schedule(schedule_id)
    acted(request, int(changed))
    return {"schedule_id": schedule_id, "paused": False, "changed": changed}


async def trigger_schedule(request: Request, board: Dashboard) -> Any:
    schedule_id = request.path_params["schedule_id"]
    return {"schedule_id": schedule_id, "job_id": await board.client.trigger_schedule(schedule_id)}


async def pause_queue(request: Request, board: Dashboard) -> Any:
    changed = await board.client.pause_queue()
    acted(request, int(changed))
    return {"queue_paused": True, "changed": changed}


async def resume_queue(request: Request, board: Dashboard) -> Any:
    changed = await board.client.resume_queue()
    acted(request, int(changed))
    return {"queue_paused": False, "changed": changed}


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
    changed = await board.client.pause_queue(name)
    acted(request, int(changed))
    return {"queue": name, "paused": True, "changed": changed}


async def resume_named_queue(request: Request, board: Dashboard) -> Any:
    name = _queue_name(request)
    changed = await board.client.resume_queue(name)
    acted(request, int(changed))
    return {"queue": name, "paused": False, "changed": changed}


async def healthz(request: Request) -> Response:
    """``{"status": "ok", "read_only": ...}`` when the store answers (within
    `StoreHealth.probe_timeout`), else 503 with ``"status": "unavailable"`` and why."""
    board = dashboard(request)
    read_only = board.access.read_only
    error = await board.health.probe(board.client.queue_paused())
    if error is None:
        return JSONResponse({"status": "ok", "read_only": read_only})
    body = {"status": "unavailable", "read_only": read_only, "error": error}
    return JSONResponse(body, status_code=503)


def api_routes() -> list[BaseRoute]:
    """The JSON API's routes (``/healthz`` included), named for ``url(...)`` in templates."""

    def get(path: str, handler: Handler, name: str) -> Route:
        return Route(path, _answer(handler), methods=["GET"], name=name)

    def post(
        path: str,
        handler: Handler,
        name: str,
        action: str,
        ids: Callable[[Request], Iterable[str]] | None = None,
    ) -> Route:
        # Every POST is an action: authorized and audited first (`ActionRoute`),
        # on the ids `ids(request)` names (default: the path's values).
        return action_route(path, _answer(handler), name=name, action=action, ids=ids)

    return [
        Route("/healthz", healthz, methods=["GET"], name="healthz"),
        get("/api/stats", stats, "api_stats"),
        get("/api/workers", workers, "api_workers"),
        get("/api/history", history, "api_history"),
        # Worker ids hold ':' and may hold '/' (``host:pid/2``): the whole path up to the verb.
        post(
            "/api/workers/{worker_id:path}/drain", drain_worker, "api_worker_drain", "worker.drain"
        ),
        post("/api/workers/{worker_id:path}/stop", stop_worker, "api_worker_stop", "worker.stop"),
        get("/api/jobs", jobs, "api_jobs"),
        # Before the routes of one job: "bulk" is no job id (ids are job-N...).
        # Its path names a verb, not an id: the ids are the ones it resolves (`permit`).
        post("/api/jobs/bulk/{action}", bulk, "api_jobs_bulk", "job.bulk", ids=lambda r: ()),
        get("/api/jobs/{job_id}", job, "api_job"),
        get("/api/jobs/{job_id}/args", job_args, "api_job_args"),
        get("/api/jobs/{job_id}/result", job_result, "api_job_result"),
        post("/api/jobs/{job_id}/retry", retry, "api_job_retry", "job.retry"),
        post("/api/jobs/{job_id}/cancel", cancel, "api_job_cancel", "job.cancel"),
        get("/api/schedules", schedules, "api_schedules"),
        post(
            "/api/schedules",
            create_schedule,
            "api_schedule_create",
            "schedule.create",
            ids=lambda r: (),
        ),
        post(
            "/api/schedules/{schedule_id}/edit",
            edit_schedule,
            "api_schedule_edit",
            "schedule.edit",
        ),
        post(
            "/api/schedules/{schedule_id}/pause",
            pause_schedule,
            "api_schedule_pause",
            "schedule.pause",
        ),
        post(
            "/api/schedules/{schedule_id}/resume",
            resume_schedule,
            "api_schedule_resume",
            "schedule.resume",
        ),
        post(
            "/api/schedules/{schedule_id}/trigger",
            trigger_schedule,
            "api_schedule_trigger",
            "schedule.trigger",
        ),
        post("/api/queue/pause", pause_queue, "api_queue_pause", "queue.pause_all"),
        post("/api/queue/resume", resume_queue, "api_queue_resume", "queue.resume_all"),
        get("/api/queues", queues, "api_queues"),
        post("/api/queues/{name}/pause", pause_named_queue, "api_named_queue_pause", "queue.pause"),
        post(
            "/api/queues/{name}/resume",
            resume_named_queue,
            "api_named_queue_resume",
            "queue.resume",
        ),
    ]

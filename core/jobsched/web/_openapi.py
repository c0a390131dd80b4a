"""``GET /api/openapi.json``: a hand-written OpenAPI 3.1 description of the JSON API."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from jobsched import HISTORY_WINDOWS, MAX_QUEUE_LENGTH, TRIGGER_RULES, JobStatus, __version__

from ._bulk import BULK_ACTIONS, BULK_CAP, FILTER_KEYS
from ._http import MAX_BODY
from ._params import MAX_OFFSET, MAX_TEXT


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_ERROR = _json(_ref("Error"), "an error, one line")
#: The characters Python's ``str.isspace`` is true of, as a regex class body.
_PY_SPACE = (
    "\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a"
    "\\u2028\\u2029\\u202f\\u205f\\u3000"
)
_NUMBER_OR_NULL = {"type": ["number", "null"]}
_STRING_OR_NULL = {"type": ["string", "null"]}


def _errors(*codes: int) -> dict[str, Any]:
    """`codes`' error answers, and 503 (the store did not answer, docs/web.md)."""
    return {str(code): _ERROR for code in (*codes, 503)}


def _action(
    action: str,
    summary: str,
    param: str | None,
    result: dict[str, Any],
    schema: dict[str, Any] | None = None,
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        # The name `create_app(authorize=...)` and the audit log see (docs/web.md).
        "x-jobsched-action": action,
        "security": [{"bearer": []}, {"session": []}],
        "responses": {"200": _json(result), **_errors(400, 401, 403, 404, 409)},
    }
    if param:
        op["parameters"] = [
            {
                "name": param,
                "in": "path",
                "required": True,
                "schema": schema or {"type": "string"},
            }
        ]
    return {"post": op}


def _with_body(path: dict[str, Any]) -> dict[str, Any]:
    """`path`'s POST with a `ScheduleFields` body, a 400 naming each bad field."""
    op = path["post"]
    op["requestBody"] = {
        "required": True,
        "content": {"application/json": {"schema": _ref("ScheduleFields")}},
    }
    op["responses"]["400"] = _json(
        {"anyOf": [_ref("FieldErrors"), _ref("Error")]}, "bad fields, one line each"
    )
    return path


def _document() -> dict[str, Any]:
    statuses = [s.value for s in JobStatus]
    job = {
        "type": "object",
        "description": "jobsched.JobInfo: the job as the store holds it (epoch seconds)",
        "properties": {
            "job_id": {"type": "string"},
            "type": {"type": "string"},
            "args": {"type": "object"},
            "status": {"enum": statuses},
            "name": _STRING_OR_NULL,
            "priority": {"type": "integer"},
            "queue": {"type": "string", "description": "the queue it waits in"},
            "attempts": {"type": "integer"},
            "last_error": _STRING_OR_NULL,
            "traceback": {
                "description": "its last failed attempt's traceback (at most 16 KiB), or null",
                "oneOf": [{"type": "null"}, {"type": "string"}],
            },
            "build_refusals": {
                "type": "integer",
                "description": "worker processes that claimed it and could not build it "
                "from its arguments (another version of its type)",
            },
            "last_refusal": _STRING_OR_NULL,
            "result": {"description": "a completed job's result (JSON); only in the detail"},
            "progress": {"oneOf": [{"type": "null"}, _ref("Progress")]},
            "history": {"type": "array", "items": _ref("Attempt")},
            "depends_on": {"type": "array", "items": {"type": "string"}},
            "trigger_rule": {"enum": list(TRIGGER_RULES)},
            "group": {
                "description": "its group (a tenant: docs/limits.md), or null",
                "oneOf": [{"type": "null"}, {"type": "string"}],
            },
            "options": {"type": "object"},
            "lease_owner": _STRING_OR_NULL,
            "lease_expires": _NUMBER_OR_NULL,
            "schedule_id": _STRING_OR_NULL,
            "submitted_at": {"type": "number"},
            "run_at": {"type": "number"},
            "started_at": _NUMBER_OR_NULL,
            "finished_at": _NUMBER_OR_NULL,
            "result_expires": _NUMBER_OR_NULL,
        },
        "required": ["job_id", "type", "args", "status"],
    }
    neighbour = {
        "type": "object",
        "properties": {
            "job_id": {"type": "string"},
            "type": _STRING_OR_NULL,
            "name": _STRING_OR_NULL,
            "status": {"description": "null: the job was purged", "enum": [*statuses, None]},
        },
    }
    schemas = {
        "Error": {
            "type": "object",
            "properties": {"error": {"type": "string"}},
            "required": ["error"],
        },
        "Job": job,
        "JobDetail": {
            "allOf": [
                _ref("Job"),
                {
                    "type": "object",
                    "properties": {
                        "upstream": {
                            "type": "array",
                            "items": _ref("Neighbour"),
                            "description": "the jobs this one depends on",
                        },
                        "downstream": {
                            "type": "array",
                            "items": _ref("Neighbour"),
                            "description": "the jobs that depend on this one",
                        },
                    },
                },
            ]
        },
        "Neighbour": neighbour,
        "Progress": {
            "type": "object",
            "properties": {
                "done": {"type": "number"},
                "total": _NUMBER_OR_NULL,
                "message": _STRING_OR_NULL,
                "updated_at": {"type": "number"},
            },
        },
        "Attempt": {
            "type": "object",
            "properties": {
                "number": {"type": "integer"},
                "status": {"type": "string"},
                "error": _STRING_OR_NULL,
                "started_at": _NUMBER_OR_NULL,
                "finished_at": _NUMBER_OR_NULL,
                "worker": _STRING_OR_NULL,
                "traceback": _STRING_OR_NULL,
            },
        },
        "HistoryBucket": {
            "type": "object",
            "description": "jobsched.HistoryBucket: attempts that ended in one bucket",
            "properties": {
                "start": {"type": "number"},
                "completed": {"type": "integer"},
                "failed": {"type": "integer"},
            },
            "required": ["start", "completed", "failed"],
        },
        "TypeStats": {
            "type": "object",
            "description": "jobsched.TypeStats: one job type over the window, and its backlog now",
            "properties": {
                "type": {"type": "string"},
                "queued": {"type": "integer"},
                "running": {"type": "integer"},
                "backlog_age": _NUMBER_OR_NULL,
                "completed": {"type": "integer"},
                "failed": {"type": "integer"},
                "failure_rate": _NUMBER_OR_NULL,
                "p50": _NUMBER_OR_NULL,
                "p95": _NUMBER_OR_NULL,
            },
            "required": ["type", "queued", "running", "completed", "failed"],
        },
        "History": {
            "type": "object",
            "description": "jobsched.History: throughput over a window (ended attempts, "
            "durations' percentiles from a histogram), per job type, and the backlog now",
            "properties": {
                "window": {"enum": list(HISTORY_WINDOWS)},
                "step": {"type": "number", "description": "seconds per bucket"},
                "type": _STRING_OR_NULL,
                "queue": _STRING_OR_NULL,
                "buckets": {"type": "array", "items": _ref("HistoryBucket")},
                "completed": {"type": "integer"},
                "failed": {"type": "integer"},
                "failure_rate": _NUMBER_OR_NULL,
                "p50": _NUMBER_OR_NULL,
                "p95": _NUMBER_OR_NULL,
                "backlog_age": {
                    "type": ["number", "null"],
                    "description": "seconds the oldest due job has waited (null: none is due)",
                },
                "types": {"type": "array", "items": _ref("TypeStats")},
                "queues": {"type": "array", "items": _ref("QueueBacklog")},
                "at": {"type": "number"},
            },
            "required": ["window", "step", "buckets", "types", "queues", "at"],
        },
        "QueueBacklog": {
            "type": "object",
            "description": "jobsched.QueueBacklog: one queue's backlog now",
            "properties": {
                "name": {"type": "string"},
                "queued": {"type": "integer"},
                "running": {"type": "integer"},
                "backlog_age": _NUMBER_OR_NULL,
            },
            "required": ["name", "queued", "running", "backlog_age"],
        },
        "Stats": {
            "type": "object",
            "description": "jobsched.Stats",
            "properties": {
                "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
                "throughput": {
                    "type": "array",
                    "description": "one bucket a minute, oldest first",
                    "items": {
                        "type": "object",
                        "properties": {
                            "start": {"type": "number"},
                            "completed": {"type": "integer"},
                            "failed": {"type": "integer"},
                        },
                    },
                },
                "workers": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "worker": {"type": "string"},
                            "running": {"type": "integer"},
                            "lease_expires": _NUMBER_OR_NULL,
                        },
                    },
                },
                "limits": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "kind": {"enum": ["executor", "job_type", "queue", "rate"]},
                            "name": {"type": "string"},
                            "limit": {"type": "integer"},
                            "in_use": {"type": "integer"},
                        },
                    },
                },
                "queue_paused": {"type": "boolean"},
                "at": {"type": "number"},
                "abandoned": {
                    "type": ["integer", "null"],
                    "description": "calls given up on that still run on a thread or pool "
                    "process (an in-process scheduler; null from a store)",
                },
                "unserved": {
                    "type": "object",
                    "additionalProperties": {"type": "integer"},
                    "description": "due jobs per job type that no live worker registered: "
                    "they wait for a worker that knows their type",
                },
            },
        },
        "Worker": {
            "type": "object",
            "description": "jobsched.WorkerRecord: a worker's heartbeat row in the registry",
            "properties": {
                "worker_id": {"type": "string"},
                "host": {"type": "string"},
                "pid": {"type": "integer"},
                "queues": {
                    "type": "object",
                    "additionalProperties": {"type": "integer"},
                    "description": "each queue it claims from, with its concurrency",
                },
                "job_types": {"type": "array", "items": {"type": "string"}},
                "version": {"type": "string"},
                "started_at": {"type": "number"},
                "last_seen": {"type": "number"},
                "running": {"type": "integer"},
                "state": {"enum": ["live", "idle", "draining", "lost"]},
                "seen_ago": {
                    "type": "number",
                    "description": "seconds since its last heartbeat, by the store's clock",
                },
                "command": {
                    "description": "what an operator asked of it (drain, stop), or null",
                    "oneOf": [{"type": "null"}, {"enum": ["drain", "stop"]}],
                },
            },
        },
        "Queue": {
            "type": "object",
            "description": "jobsched.QueueInfo: one queue at a glance",
            "properties": {
                "name": {"type": "string"},
                "depth": {"type": "integer", "description": "jobs ready to run now"},
                "oldest_age": {
                    "description": "seconds the oldest ready job has waited (null: none)",
                    **_NUMBER_OR_NULL,
                },
                "running": {"type": "integer"},
                "throughput": {
                    "type": "integer",
                    "description": "jobs finished in the last minute",
                },
                "paused": {"type": "boolean", "description": "paused on its own"},
            },
        },
        "Schedule": {
            "type": "object",
            "description": "jobsched.ScheduleInfo",
            "properties": {
                "schedule_id": {"type": "string"},
                "name": _STRING_OR_NULL,
                "type": {"type": "string"},
                "trigger": {"type": "object"},
                "next_run": {"description": "null: the schedule ended", **_NUMBER_OR_NULL},
                "paused": {"type": "boolean"},
                "active": {"type": "boolean"},
                "fired": {"type": "integer"},
                "skipped": {"type": "integer"},
                "last_job_id": _STRING_OR_NULL,
                "overdue": {
                    "type": "boolean",
                    "description": "its next fire is over 10 s past: no process fires it",
                },
                "args": {"type": "object", "description": "the fired job's arguments"},
                "queue": {"type": "string", "description": "the fired job's queue"},
            },
        },
        "ScheduleFields": {
            "type": "object",
            "description": "a schedule to create (type, args, queue and cron+tz or every) or "
            "the change of one (args and/or cron+tz or every); the page's form sends the "
            "same fields urlencoded, args as JSON text and kind=cron|interval",
            "properties": {
                "type": {"type": "string", "description": "a registered job type (create)"},
                "args": {"type": "object", "description": "the job's arguments"},
                "queue": {"type": "string", "description": "the jobs' queue (create)"},
                "cron": {"type": "string", "description": "a cron expression"},
                "tz": {"type": "string", "description": "the cron's IANA zone (default UTC)"},
                "every": {"type": "number", "description": "an interval in seconds (> 0)"},
                "kind": {"enum": ["cron", "interval"]},
            },
        },
        "FieldErrors": {
            "type": "object",
            "description": "400: every bad field, one line each",
            "properties": {
                "error": {"type": "string"},
                "errors": {"type": "object", "additionalProperties": {"type": "string"}},
            },
            "required": ["error", "errors"],
        },
    }
    text = {"type": "string", "maxLength": MAX_TEXT, "pattern": "^[^\\x00]*$"}
    query = [
        {
            "name": "status",
            "in": "query",
            "description": "one or several, repeated (or comma-separated: failed,timed_out)",
            "style": "form",
            "explode": True,
            "schema": {"type": "array", "items": {"enum": statuses}},
        },
        {"name": "type", "in": "query", "description": "a job type", "schema": text},
        {
            "name": "q",
            "in": "query",
            "description": "case-insensitive text in the id, name, type or arguments",
            "schema": text,
        },
        {
            "name": "limit",
            "in": "query",
            "schema": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50},
        },
        {
            "name": "offset",
            "in": "query",
            "schema": {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET, "default": 0},
        },
    ]
    changed = {"type": "object", "properties": {"changed": {"type": "boolean"}}}
    asked = {
        "type": "object",
        "properties": {"worker_id": {"type": "string"}, "command": {"enum": ["drain", "stop"]}},
    }
    queue_name = {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_QUEUE_LENGTH,
        # Python's str.strip() also strips \x1c-\x1f and \x85, which a JSON
        # schema's \s (ECMA-262) leaves out.
        "pattern": "^[^\\s\\x00\\x1c-\\x1f\\x85](.*[^\\s\\x00\\x1c-\\x1f\\x85])?$",
        "description": "a queue's name: no surrounding spaces, no NUL",
    }
    # What `check_queue` takes, or nothing: no NUL, and no space at either
    # end as Python's str.strip() sees it (not JavaScript's \\s).
    edge = f"[^{_PY_SPACE}\\x00]"
    queue_or_empty = f"^({edge}([^\\x00]*{edge})?)?$"
    paths = {
        "/healthz": {
            "get": {
                "summary": "whether the app and its store answer",
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {
                                "status": {"const": "ok"},
                                "read_only": {"type": "boolean"},
                            },
                            "required": ["status", "read_only"],
                        }
                    ),
                    "503": _json(
                        {
                            "type": "object",
                            "properties": {
                                "status": {"const": "unavailable"},
                                "read_only": {"type": "boolean"},
                                "error": {"type": "string"},
                            },
                            "required": ["status", "read_only", "error"],
                        },
                        "the store did not answer within 2 s",
                    ),
                },
            }
        },
        "/api/stats": {
            "get": {
                "summary": "counts, throughput, workers, limits",
                "responses": {"200": _json(_ref("Stats")), **_errors()},
            }
        },
        "/api/workers": {
            "get": {
                "summary": "the worker registry: live, idle, draining and lost workers",
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {
                                "workers": {"type": "array", "items": _ref("Worker")},
                                "registry": {
                                    "type": "boolean",
                                    "description": "false: the store keeps no worker registry",
                                },
                            },
                        }
                    ),
                    **_errors(),
                },
            }
        },
        "/api/workers/{worker_id}/drain": _action(
            "worker.drain",
            "the worker claims nothing more, finishes its running jobs and stays (draining); "
            "it reads the request at its next heartbeat (at once on PostgreSQL). 404: no live "
            "worker has this id; 409: the client cannot ask (an in-process scheduler)",
            "worker_id",
            asked,
        ),
        "/api/workers/{worker_id}/stop": _action(
            "worker.stop",
            "the worker drains, then its process stops as on SIGTERM and leaves the registry; "
            "404 and 409 as for drain",
            "worker_id",
            asked,
        ),
        "/api/history": {
            "get": {
                "summary": "throughput over a window, per job type, and the backlog now",
                "parameters": [
                    {
                        "name": "window",
                        "in": "query",
                        "description": "1h and 24h: 5-minute buckets; 7d: hourly ones",
                        "schema": {"enum": list(HISTORY_WINDOWS), "default": "24h"},
                    },
                    {"name": "type", "in": "query", "description": "a job type", "schema": text},
                    {
                        "name": "queue",
                        "in": "query",
                        "description": "a queue's name (empty: every queue)",
                        "schema": {**queue_name, "minLength": 0, "pattern": queue_or_empty},
                    },
                ],
                "responses": {"200": _json(_ref("History")), **_errors(400, 501)},
            }
        },
        "/api/jobs": {
            "get": {
                "summary": "jobs, newest first, filtered and paged",
                "parameters": query,
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {
                                "jobs": {"type": "array", "items": _ref("Job")},
                                "total": {"type": "integer"},
                                "limit": {"type": "integer"},
                                "offset": {"type": "integer"},
                            },
                        }
                    ),
                    **_errors(400),
                },
            }
        },
        "/api/jobs/{job_id}": {
            "get": {
                "summary": "one job with its attempts, progress, result and dependencies",
                "parameters": [
                    {"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {"200": _json(_ref("JobDetail")), **_errors(400, 404)},
            }
        },
        "/api/jobs/{job_id}/args": {
            "get": {
                "summary": "a job's arguments alone (the job page previews them)",
                "parameters": [
                    {"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {"200": _json({"type": "object"}), **_errors(400, 404)},
            }
        },
        "/api/jobs/{job_id}/result": {
            "get": {
                "summary": "a job's result alone: null until it completed",
                "parameters": [
                    {"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {"200": _json({}), **_errors(400, 404)},
            }
        },
        "/api/jobs/bulk/{action}": _bulk(statuses),
        "/api/jobs/{job_id}/retry": _action(
            "job.retry", "run a failed, timed-out or cancelled job again", "job_id", _ref("Job")
        ),
        "/api/jobs/{job_id}/cancel": _action("job.cancel", "cancel a job", "job_id", _ref("Job")),
        "/api/schedules": {
            "get": {
                "summary": "recurring schedules",
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {
                                "schedules": {"type": "array", "items": _ref("Schedule")}
                            },
                        }
                    ),
                    **_errors(),
                },
            },
            **_with_body(
                _action(
                    "schedule.create",
                    "create a schedule of a registered job type on a cron rule or an interval",
                    None,
                    {"type": "object", "properties": {"schedule_id": {"type": "string"}}},
                )
            ),
        },
        "/api/schedules/{schedule_id}/edit": _with_body(
            _action(
                "schedule.edit",
                "give a schedule new arguments or a new rule: it is replaced by the edited "
                "one (whose id the answer names; replaced: the old id, null if unchanged)",
                "schedule_id",
                {
                    "type": "object",
                    "properties": {
                        "schedule_id": {"type": "string"},
                        "replaced": _STRING_OR_NULL,
                    },
                },
            )
        ),
        "/api/schedules/{schedule_id}/pause": _action(
            "schedule.pause", "pause a schedule", "schedule_id", changed
        ),
        "/api/schedules/{schedule_id}/resume": _action(
            "schedule.resume", "resume a schedule", "schedule_id", changed
        ),
        "/api/schedules/{schedule_id}/trigger": _action(
            "schedule.trigger",
            "submit the schedule's job now, once",
            "schedule_id",
            {"type": "object", "properties": {"job_id": {"type": "string"}}},
        ),
        "/api/queue/pause": _action("queue.pause_all", "workers claim no new jobs", None, changed),
        "/api/queue/resume": _action("queue.resume_all", "workers claim jobs again", None, changed),
        "/api/queues": {
            "get": {
                "summary": "each queue: depth, oldest waiting job's age, running, throughput",
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {
                                "queues": {"type": "array", "items": _ref("Queue")},
                                "all_paused": {
                                    "type": "boolean",
                                    "description": "every queue is paused (/api/queue/pause)",
                                },
                            },
                        }
                    ),
                    **_errors(),
                },
            }
        },
        "/api/queues/{name}/pause": _action(
            "queue.pause", "workers claim none of this queue's jobs", "name", changed, queue_name
        ),
        "/api/queues/{name}/resume": _action(
            "queue.resume", "workers claim this queue's jobs again", "name", changed, queue_name
        ),
        "/api/events": {
            "get": {
                "summary": "server-sent events: `stats` (a Stats) whenever something changed",
                "responses": {
                    "200": {"description": "an event stream", "content": {"text/event-stream": {}}},
                    **_errors(),
                },
            }
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "jobsched web",
            "version": __version__,
            "description": "The JSON API of the jobsched dashboard (docs/web.md).",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "session": {
                    "type": "apiKey",
                    "in": "cookie",
                    "name": "jobsched_session",
                    "description": "set by POST /login; POSTs also need the "
                    "jobsched_csrf cookie's value in the X-CSRF-Token header",
                },
            },
        },
    }


def _bulk(statuses: list[str]) -> dict[str, Any]:
    """``POST /api/jobs/bulk/{action}`` (`jobsched.web._bulk`)."""
    text = {"type": "string", "maxLength": MAX_TEXT, "pattern": "^[^\\x00]*$"}
    status = {"enum": statuses}
    by_ids = {
        "type": "object",
        "properties": {
            "ids": {
                "type": "array",
                "items": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_TEXT,
                    "pattern": "^[^\\x00]*$",
                },
                "minItems": 1,
                "maxItems": BULK_CAP,
                "description": f"job ids (at most {BULK_CAP}, and the body at most "
                f"{MAX_BODY} bytes: about 2,000 ids; for more, send a filter)",
            }
        },
        "required": ["ids"],
        "additionalProperties": False,
    }
    by_filter = {
        "type": "object",
        "properties": {
            "filter": {
                "type": "object",
                "description": "the Jobs page's filters, each optional ({} is every job); "
                f"the newest {BULK_CAP} matching jobs at most",
                "properties": {
                    "status": {"oneOf": [status, {"type": "array", "items": status}]},
                    "type": text,
                    "q": {**text, "description": "text in the id, name, type or arguments"},
                },
                "additionalProperties": False,
            }
        },
        "required": ["filter"],
        "additionalProperties": False,
    }
    count = {"type": "integer", "minimum": 0}
    result = {
        "type": "object",
        "properties": {
            "action": {"enum": list(BULK_ACTIONS)},
            "matched": {**count, "description": "jobs the ids or the filter named"},
            "selected": {**count, "description": f"of those, the ones taken (at most {BULK_CAP})"},
            "acted": {**count, "description": "of those, the ones the action applied to"},
            "skipped": {**count, "description": "selected but not in a status the action takes"},
            "capped": {"type": "boolean", "description": "the cap left out matching jobs"},
            "cap": {"const": BULK_CAP},
            "filter": {
                "description": "the filter applied (null for ids)",
                "oneOf": [{"type": "null"}, {"type": "object"}],
            },
            "job_ids": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["action", "matched", "selected", "acted", "skipped", "capped", "job_ids"],
    }
    return {
        "post": {
            "summary": "retry, requeue (= retry), cancel or purge many jobs: by id or by filter",
            "description": "retry (requeue): failed, timed-out and cancelled jobs run again; "
            "cancel: unfinished jobs are cancelled (running ones asked to stop); purge: "
            "finished jobs are deleted, never an unfinished one. Jobs in another status "
            f"are left alone (skipped). Filter keys: {', '.join(FILTER_KEYS)}. "
            "`authorize` is asked for job.bulk, then for job.ACTION with the selected ids.",
            "x-jobsched-action": "job.bulk",
            "security": [{"bearer": []}, {"session": []}],
            "parameters": [
                {
                    "name": "action",
                    "in": "path",
                    "required": True,
                    "schema": {"enum": list(BULK_ACTIONS)},
                }
            ],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"oneOf": [by_ids, by_filter]}}},
            },
            "responses": {"200": _json(result), **_errors(400, 401, 403, 413)},
        }
    }


async def openapi(request: Request) -> Response:
    return JSONResponse(_document())

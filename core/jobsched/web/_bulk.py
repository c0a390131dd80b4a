"""Bulk actions: ``POST /api/jobs/bulk/{action}`` over chosen jobs or a filter.

The body names the jobs either by id, ``{"ids": ["job-1", "job-2"]}``, or
by the Jobs page's filter, ``{"filter": {"status": "failed", "type":
"email", "q": "text"}}`` (every key optional: ``{"filter": {}}`` is every
job). A filter is resolved here, newest job first, to at most `BULK_CAP`
ids; then the action applies to those the operator API may act on
(`OperatorAPI.retry_many`, `cancel_many`, `purge_many`), in one store
transaction, and leaves the others alone (a job that finished, or was
retried, since the page was drawn). The answer says how many jobs matched,
how many were chosen (the cap may cut them), how many were acted on, and
their ids.

The actions, for a selection: ``retry`` runs the failed, timed-out or
cancelled jobs again (``requeue`` is the same, under the name ``jobsched
jobs requeue`` gives it for a filter); ``cancel`` cancels the unfinished
ones; ``purge`` deletes the finished ones (never an unfinished job).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import attrs
from starlette.requests import Request

from jobsched import JobStatus, OperatorAPI

from ._access import acted, permit
from ._http import shown
from ._params import BadRequest, check_text
from ._state import Dashboard

#: The most jobs one bulk action takes: ids given, or the jobs a filter
#: matches (the newest first; the answer says when the cap cut them).
BULK_CAP = 10_000
#: The jobs a filter is read in, per page of the operator API.
RESOLVE_PAGE = 1000
#: The bulk actions, in the order the page offers them.
BULK_ACTIONS = ("retry", "requeue", "cancel", "purge")
#: The keys of ``{"filter": {...}}``: the Jobs page's filters.
FILTER_KEYS = ("status", "type", "q")
STATUSES = tuple(s.value for s in JobStatus)

Act = Callable[[OperatorAPI, list[str]], Awaitable[list[str]]]


def _retry(client: OperatorAPI, ids: list[str]) -> Awaitable[list[str]]:
    return client.retry_many(ids)


def _cancel(client: OperatorAPI, ids: list[str]) -> Awaitable[list[str]]:
    return client.cancel_many(ids)


def _purge(client: OperatorAPI, ids: list[str]) -> Awaitable[list[str]]:
    return client.purge_many(ids)


#: What each action calls; ``requeue`` of a selection is ``retry``.
ACTS: dict[str, Act] = {"retry": _retry, "requeue": _retry, "cancel": _cancel, "purge": _purge}


@attrs.frozen(kw_only=True)
class Selection:
    """The jobs a request chose: `ids` (at most `BULK_CAP`), how many
    `matched` (a filter's total; the ids' count otherwise) and the filter."""

    ids: list[str]
    matched: int
    filter: dict[str, Any] | None = None

    @property
    def capped(self) -> bool:
        """Whether the cap left out some matching jobs."""
        return self.matched > len(self.ids)


def check_action(action: str) -> str:
    """`action` if it is a bulk action; `BadRequest` naming it otherwise."""
    if action not in ACTS:
        raise BadRequest(f"unknown bulk action {shown(action)} (one of {', '.join(BULK_ACTIONS)})")
    return action


async def read_body(request: Request) -> dict[str, Any]:
    """The request's JSON object; `BadRequest` saying what is wrong with it."""
    raw = await request.body()
    if not raw.strip():
        raise BadRequest('the body must be a JSON object: {"ids": [...]} or {"filter": {...}}')
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest(f"the body must be a JSON object, got {type(body).__name__}")
    return body


async def select(client: OperatorAPI, body: dict[str, Any]) -> Selection:
    """The jobs `body` chooses (`ids` or `filter`, exactly one of them)."""
    unknown = sorted(set(body) - {"ids", "filter"})
    if unknown:
        raise BadRequest(f"unknown key {shown(unknown[0])} in the body (ids or filter)")
    if ("ids" in body) == ("filter" in body):
        raise BadRequest('give exactly one of "ids" (a list of job ids) or "filter" (an object)')
    if "ids" in body:
        ids = check_ids(body["ids"])
        return Selection(ids=ids, matched=len(ids))
    wanted = check_filter(body["filter"])
    ids, matched = await resolve(client, wanted)
    return Selection(ids=ids, matched=matched, filter=wanted)


def check_ids(value: Any) -> list[str]:
    """``ids``: a list of job ids (strings), at most `BULK_CAP`, duplicates kept once."""
    if not isinstance(value, list):
        raise BadRequest(f"ids must be a list of job ids, got {type(value).__name__}")
    if not value:
        raise BadRequest("ids is empty: name at least one job")
    if len(value) > BULK_CAP:
        raise BadRequest(
            f"ids has {len(value)} job ids: at most {BULK_CAP} per request "
            "(for more, send a filter)"
        )
    for i, job_id in enumerate(value):
        if not isinstance(job_id, str) or not job_id:
            raise BadRequest(f"ids[{i}] must be a job id (a non-empty string), got {job_id!r:.40}")
        check_text(f"ids[{i}]", job_id)
    return list(dict.fromkeys(value))


def check_filter(value: Any) -> dict[str, Any]:
    """``filter``: ``status`` (a status or a list of them), ``type`` and ``q``
    (text), each optional; the filter with the keys given."""
    if not isinstance(value, dict):
        raise BadRequest(f"filter must be an object, got {type(value).__name__}")
    for key in value:
        if key not in FILTER_KEYS:
            raise BadRequest(f"unknown filter {shown(str(key))} (one of {', '.join(FILTER_KEYS)})")
    wanted: dict[str, Any] = {}
    status = value.get("status")
    if status is not None and status != "" and status != []:
        listed = status if isinstance(status, list) else [status]
        for s in listed:
            if not isinstance(s, str) or s not in STATUSES:
                given = shown(s) if isinstance(s, str) else repr(s)
                raise BadRequest(f"unknown status {given} in filter (one of {', '.join(STATUSES)})")
        wanted["status"] = list(dict.fromkeys(listed))
    for key in ("type", "q"):
        text = value.get(key)
        if text is None or text == "":
            continue
        if not isinstance(text, str):
            raise BadRequest(f"filter.{key} must be text, got {type(text).__name__}")
        check_text(f"filter.{key}", text)
        wanted[key] = text
    return wanted


async def resolve(client: OperatorAPI, wanted: dict[str, Any]) -> tuple[list[str], int]:
    """The ids of the jobs `wanted` matches, newest first, at most `BULK_CAP`,
    and how many match in all (read a page at a time: as many as matched
    when each page was read, so a job that changed meanwhile may be missed
    or met twice; it is kept once)."""
    ids: dict[str, None] = {}
    matched = 0
    offset = 0
    while len(ids) < BULK_CAP:
        page = await client.page(
            status=wanted.get("status"),
            type=wanted.get("type"),
            q=wanted.get("q"),
            limit=min(RESOLVE_PAGE, BULK_CAP - len(ids)),
            offset=offset,
        )
        if offset == 0:
            matched = page.total
        ids.update((info.job_id, None) for info in page.jobs)
        offset += len(page.jobs)
        if not page.jobs or offset >= page.total:
            break
    return list(ids), max(matched, len(ids))


async def bulk(request: Request, board: Dashboard) -> Any:
    """``POST /api/jobs/bulk/{action}``: the answer `answer` describes."""
    action = check_action(request.path_params["action"])
    selection = await select(board.client, await read_body(request))
    # The route let `job.bulk` through; now that the ids are known, the hook
    # is asked again with the action each job gets (as one job's route would).
    await permit(request, f"job.{action}", selection.ids)
    done = await ACTS[action](board.client, selection.ids) if selection.ids else []
    acted(request, len(done))
    return answer(action, selection, done)


def answer(action: str, selection: Selection, done: Iterable[str]) -> dict[str, Any]:
    """``{"action", "matched", "selected", "acted", "skipped", "capped",
    "cap", "filter", "job_ids"}``: `job_ids` are the jobs acted on."""
    acted = list(done)
    return {
        "action": action,
        "matched": selection.matched,
        "selected": len(selection.ids),
        "acted": len(acted),
        "skipped": len(selection.ids) - len(acted),
        "capped": selection.capped,
        "cap": BULK_CAP,
        "filter": selection.filter,
        "job_ids": acted,
    }

"""Bulk actions of the JSON API: ``POST /api/jobs/bulk/{action}``.

On every kind of store the dashboard serves (an in-process scheduler through
``create_app(scheduler=...)``, ``memory://``, SQLite in shared mode,
PostgreSQL), through httpx's ASGI transport: by ids and by filter, the cap,
a selection only part of which the action applies to, bad requests (400
naming the culprit), and the token and CSRF checks every action has. The
Jobs page's selection is tested in Chromium (tests/test_web_bulk_browser.py).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from jobsched import JobStatus, UnknownJobError
from jobsched.web import _bulk
from jobsched.web._bulk import BULK_CAP
from web_support import BEARER, STORES, TOKEN, Echo, Env, Gate, get_json, make_env, post_json

pytestmark = pytest.mark.timeout(120)

READ_ONLY = "no token configured: start jobsched web with --token"
FAILED, COMPLETED, PENDING = JobStatus.FAILED, JobStatus.COMPLETED, JobStatus.PENDING


@pytest.fixture(params=STORES)
async def env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Env]:
    async with make_env(request.param, request, tmp_path, TOKEN) as made:
        yield made


@pytest.fixture(params=STORES)
async def read_only_env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Env]:
    async with make_env(request.param, request, tmp_path, None) as made:
        yield made


async def failed_gates(env: Env, gate: Path, n: int) -> list[str]:
    """`n` jobs that failed (their gate file did not exist); their ids."""
    ids = [await env.submit(Gate(str(gate))) for _ in range(n)]
    for job_id in ids:
        assert (await env.wait(job_id)).status is FAILED
    return ids


async def status(env: Env, job_id: str) -> JobStatus:
    return (await env.client.get(job_id)).status


# ── by ids ─────────────────────────────────────────────────────────────
async def test_retry_by_ids_retries_the_failed_ones_and_skips_the_rest(
    env: Env, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    failed = await failed_gates(env, gate, 3)
    done = await env.submit(Echo("done"))
    await env.wait(done)
    gate.touch()  # retried, they pass
    ids = [failed[0], done, "job-nope", failed[2], failed[0]]
    answer = await post_json(env, "/api/jobs/bulk/retry", json={"ids": ids})
    assert answer == {
        "action": "retry",
        "matched": 4,
        "selected": 4,
        "acted": 2,
        "skipped": 2,
        "capped": False,
        "cap": BULK_CAP,
        "filter": None,
        "job_ids": [failed[0], failed[2]],
    }
    for job_id in (failed[0], failed[2]):
        assert (await env.wait(job_id)).status is COMPLETED
    assert await status(env, failed[1]) is FAILED
    assert await status(env, done) is COMPLETED


async def test_cancel_then_purge_by_ids(env: Env) -> None:
    waiting = [await env.submit(Echo(f"later {i}"), delay=3600) for i in range(3)]
    done = await env.submit(Echo("done"))
    await env.wait(done)
    answer = await post_json(env, "/api/jobs/bulk/cancel", json={"ids": [*waiting[:2], done]})
    assert (answer["acted"], answer["skipped"], answer["job_ids"]) == (2, 1, waiting[:2])
    assert [await status(env, j) for j in waiting] == [
        JobStatus.CANCELLED,
        JobStatus.CANCELLED,
        PENDING,
    ]
    # Purge deletes finished jobs only: the waiting one stays.
    answer = await post_json(env, "/api/jobs/bulk/purge", json={"ids": [*waiting, done]})
    assert (answer["acted"], answer["skipped"]) == (3, 1)
    assert answer["job_ids"] == [*waiting[:2], done]
    for job_id in [*waiting[:2], done]:
        with pytest.raises(UnknownJobError):
            await env.client.get(job_id)
    assert await status(env, waiting[2]) is PENDING


# ── by filter ──────────────────────────────────────────────────────────
async def test_a_filter_selects_every_matching_job(env: Env, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    failed = await failed_gates(env, gate, 4)
    echoes = [await env.submit(Echo(f"echo {i}")) for i in range(2)]
    for job_id in echoes:
        await env.wait(job_id)
    gate.touch()
    answer = await post_json(env, "/api/jobs/bulk/requeue", json={"filter": {"status": "failed"}})
    assert answer["action"] == "requeue"
    assert (answer["matched"], answer["selected"], answer["acted"]) == (4, 4, 4)
    assert answer["capped"] is False and answer["filter"] == {"status": ["failed"]}
    assert answer["job_ids"] == list(reversed(failed))  # newest first
    for job_id in failed:
        assert (await env.wait(job_id)).status is COMPLETED
    # Type and text narrow it as on the Jobs page.
    body = {"filter": {"status": ["completed"], "type": "echo", "q": "ECHO 1"}}
    answer = await post_json(env, "/api/jobs/bulk/purge", json=body)
    assert (answer["matched"], answer["job_ids"]) == (1, [echoes[1]])
    assert (await get_json(env, "/api/jobs", status="completed"))["total"] == 5
    # Nothing matches: nothing done, no error.
    answer = await post_json(env, "/api/jobs/bulk/retry", json={"filter": {"status": "failed"}})
    assert (answer["matched"], answer["acted"], answer["job_ids"]) == (0, 0, [])


async def test_the_cap_cuts_a_filter_and_the_answer_says_so(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_bulk, "BULK_CAP", 3)
    monkeypatch.setattr(_bulk, "RESOLVE_PAGE", 2)  # and read it in pages
    waiting = [await env.submit(Echo(f"later {i}"), delay=3600) for i in range(5)]
    answer = await post_json(env, "/api/jobs/bulk/cancel", json={"filter": {"status": "pending"}})
    assert answer["cap"] == 3
    assert (answer["matched"], answer["selected"], answer["acted"]) == (5, 3, 3)
    assert answer["capped"] is True
    assert answer["job_ids"] == [waiting[4], waiting[3], waiting[2]]
    assert [await status(env, j) for j in waiting[:2]] == [PENDING, PENDING]
    # Ids past the cap are refused, naming the count.
    refused = await post_json(env, "/api/jobs/bulk/cancel", 400, json={"ids": waiting[:4]})
    assert refused == {
        "error": "ids has 4 job ids: at most 3 per request (for more, send a filter)"
    }


# ── refusals ───────────────────────────────────────────────────────────
BAD: list[tuple[str, Any, str]] = [
    ("explode", {"ids": ["j"]}, "unknown bulk action 'explode' (one of retry, requeue, "),
    ("retry", b"", 'the body must be a JSON object: {"ids": [...]} or {"filter": {...}}'),
    ("retry", b"{not json", "the body is not JSON: "),
    ("retry", [], "the body must be a JSON object, got list"),
    ("retry", {}, 'give exactly one of "ids" (a list of job ids) or "filter" (an object)'),
    ("retry", {"ids": ["j"], "filter": {}}, 'give exactly one of "ids"'),
    ("retry", {"idz": ["j"]}, "unknown key 'idz' in the body (ids or filter)"),
    ("retry", {"ids": "job-1"}, "ids must be a list of job ids, got str"),
    ("retry", {"ids": []}, "ids is empty: name at least one job"),
    ("retry", {"ids": ["j", 7]}, "ids[1] must be a job id (a non-empty string), got 7"),
    ("retry", {"ids": ["a\x00b"]}, "ids[0] must not contain a NUL character"),
    ("retry", {"filter": "failed"}, "filter must be an object, got str"),
    ("retry", {"filter": {"owner": "me"}}, "unknown filter 'owner' (one of status, type, q)"),
    ("retry", {"filter": {"status": "lost"}}, "unknown status 'lost' in filter (one of "),
    ("retry", {"filter": {"status": ["failed", 3]}}, "unknown status 3 in filter"),
    ("retry", {"filter": {"type": 5}}, "filter.type must be text, got int"),
    ("retry", {"filter": {"q": "a\x00"}}, "filter.q must not contain a NUL character"),
]


async def test_a_bad_request_is_400_naming_the_culprit_and_changes_nothing(
    env: Env, tmp_path: Path
) -> None:
    (failed,) = await failed_gates(env, tmp_path / "gate", 1)
    for action, body, message in BAD:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        answer = await env.http.post(
            f"/api/jobs/bulk/{action}",
            content=content,
            headers={**BEARER, "Content-Type": "application/json"},
        )
        assert answer.status_code == 400, (body, answer.text)
        assert answer.json()["error"].startswith(message), (body, answer.json())
    assert await status(env, failed) is FAILED


async def test_a_body_over_the_limit_is_413(env: Env) -> None:
    ids = [f"job-{i:08d}" for i in range(5000)]  # 80 KB: past the 64 KiB every POST has
    answer = await env.http.post("/api/jobs/bulk/purge", json={"ids": ids}, headers=BEARER)
    assert answer.status_code == 413
    assert answer.json()["error"].startswith("request body too large")


async def test_bulk_actions_need_the_token_and_the_csrf_header(env: Env, tmp_path: Path) -> None:
    (failed,) = await failed_gates(env, tmp_path / "gate", 1)
    body = {"filter": {"status": "failed"}}
    answer = await env.http.post("/api/jobs/bulk/retry", json=body)
    assert answer.status_code == 401 and answer.json()["error"].startswith("authentication")
    wrong = await env.http.post(
        "/api/jobs/bulk/retry", json=body, headers={"Authorization": "Bearer guess"}
    )
    assert wrong.status_code == 401 and wrong.json() == {"error": "wrong token"}
    await env.http.post("/login", data={"token": TOKEN})
    csrf = env.http.cookies["jobsched_csrf"]
    refused = await env.http.post("/api/jobs/bulk/retry", json=body)
    assert refused.status_code == 403 and "CSRF" in refused.json()["error"]
    assert await status(env, failed) is FAILED
    allowed = await env.http.post("/api/jobs/bulk/retry", json=body, headers={"X-CSRF-Token": csrf})
    assert allowed.status_code == 200 and allowed.json()["job_ids"] == [failed]


async def test_a_read_only_dashboard_refuses_them(read_only_env: Env) -> None:
    env = read_only_env
    waiting = await env.submit(Echo("later"), delay=3600)
    for action in ("retry", "requeue", "cancel", "purge"):
        answer = await env.http.post(
            f"/api/jobs/bulk/{action}", json={"ids": [waiting]}, headers=BEARER
        )
        assert (answer.status_code, answer.json()) == (403, {"error": READ_ONLY})
    assert await status(env, waiting) is PENDING


async def test_the_openapi_document_describes_the_route(env: Env) -> None:
    document = await get_json(env, "/api/openapi.json")
    post = document["paths"]["/api/jobs/bulk/{action}"]["post"]
    assert post["parameters"][0]["schema"] == {"enum": ["retry", "requeue", "cancel", "purge"]}
    body = post["requestBody"]["content"]["application/json"]["schema"]["oneOf"]
    assert [sorted(s["required"]) for s in body] == [["ids"], ["filter"]]
    assert body[0]["properties"]["ids"]["maxItems"] == BULK_CAP
    assert {"200", "400", "401", "403", "413"} <= set(post["responses"])

"""Creating and editing schedules through the dashboard's API and its page's
form (``POST /api/schedules``, ``POST /api/schedules/{id}/edit``), the last
runs and the overdue marker of the schedules page, on every store: an
in-process scheduler (``create_app(scheduler=...)``), ``memory://``, a SQLite
file in shared mode and a PostgreSQL schema."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from jobsched import OVERDUE_AFTER, JobStatus, UnknownScheduleError
from jobsched.store import SharedScheduleRow
from web_support import STORES, TOKEN, Echo, Env, get_json, make_env, post_json

pytestmark = pytest.mark.timeout(120)

CRON = {"type": "echo", "args": {"text": "nightly"}, "cron": "0 2 * * 1", "tz": "Europe/Berlin"}


@pytest.fixture(params=STORES)
async def env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Env]:
    async with make_env(request.param, request, tmp_path, TOKEN) as made:
        yield made


@pytest.fixture
async def local_env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Env]:
    """The dashboard of an in-process scheduler (``create_app(scheduler=...)``)."""
    async with make_env("memory", request, tmp_path, TOKEN) as made:
        yield made


@pytest.fixture(params=[kind for kind in STORES if kind != "memory"])
async def shared_env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Env]:
    """The dashboard of a shared store (``create_app(store_url)``)."""
    async with make_env(request.param, request, tmp_path, TOKEN) as made:
        yield made


async def listed(env: Env) -> dict[str, dict[str, Any]]:
    """``GET /api/schedules`` by id."""
    found = (await get_json(env, "/api/schedules"))["schedules"]
    return {s["schedule_id"]: s for s in found}


def active(schedules: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {k: s for k, s in schedules.items() if s["active"]}


# ── create ─────────────────────────────────────────────────────────────
async def test_a_cron_schedule_is_created_listed_and_described(env: Env) -> None:
    created = await post_json(env, "/api/schedules", json=CRON)
    schedule_id = created["schedule_id"]
    (info,) = (await listed(env)).values()
    assert info["schedule_id"] == schedule_id
    assert (info["type"], info["args"], info["queue"]) == ("echo", {"text": "nightly"}, "default")
    assert {k: info["trigger"][k] for k in ("cron", "tz")} == {
        "cron": "0 2 * * 1",
        "tz": "Europe/Berlin",
    }
    assert info["active"] and not info["paused"] and info["next_run"] > time.time()
    page = (await env.http.get("/schedules")).text
    assert '<div class="cron-text" data-testid="cron-description">At 02:00, only on Monday' in (
        page
    )
    if env.scheduler is None:
        # A stored schedule's id names its job and rule: adding the same one
        # in code finds the schedule the page made.
        same = await env.client.add_schedule(
            Echo("nightly"), trigger={"cron": "0 2 * * 1", "tz": "Europe/Berlin"}
        )
        assert same == schedule_id


async def test_the_pages_form_creates_an_interval_schedule_on_a_queue(env: Env) -> None:
    form = {
        "type": "echo",
        "args": '{"text": "every 90 s"}',
        "queue": "reports",
        "kind": "interval",
        "cron": "",
        "tz": "UTC",
        "every": "90",
    }
    created = await post_json(env, "/api/schedules", data=form)
    info = (await listed(env))[created["schedule_id"]]
    assert info["trigger"]["interval"] == 90 and "cron" not in info["trigger"]
    assert (info["args"], info["queue"]) == ({"text": "every 90 s"}, "reports")
    # It fires now (add_schedule's start_in=0), then every 90 s: whether or
    # not this process fired it yet, its next run is within one period.
    assert info["next_run"] <= time.time() + 90


#: A create request with one bad field (or several), and the line for each.
BAD_CREATES: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "unknown type": (
        {**CRON, "type": "nope"},
        {"type": "unknown job type 'nope' (registered: "},
    ),
    "no type": ({k: v for k, v in CRON.items() if k != "type"}, {"type": "choose the job type"}),
    "bad json": ({**CRON, "args": '{"text": '}, {"args": "not JSON: Expecting value"}),
    "args not an object": ({**CRON, "args": "[1, 2]"}, {"args": "must be a JSON object"}),
    "args not the fields": ({**CRON, "args": {"txt": "x"}}, {"args": "echo job: "}),
    "bad cron": ({**CRON, "cron": "61 * * * *"}, {"cron": "invalid cron expression '61 * * * *'"}),
    "bad zone": ({**CRON, "tz": "Mars/Olympus"}, {"tz": "unknown time zone 'Mars/Olympus'"}),
    "zero interval": (
        {"type": "echo", "args": {"text": "x"}, "every": 0},
        {"every": "must be a positive number of seconds, got 0"},
    ),
    "negative interval": (
        {"type": "echo", "args": {"text": "x"}, "every": -5},
        {"every": "must be a positive number of seconds, got -5"},
    ),
    "interval not a number": (
        {"type": "echo", "args": {"text": "x"}, "every": "soon"},
        {"every": "must be a number of seconds, got 'soon'"},
    ),
    "no rule": ({"type": "echo", "args": {"text": "x"}}, {"every": "give a cron expression"}),
    "both rules": ({**CRON, "every": 60}, {"every": "not both"}),
    "bad kind": ({**CRON, "kind": "weekly"}, {"kind": "must be 'cron' or 'interval'"}),
    "bad queue": ({**CRON, "queue": " x"}, {"queue": "queue must be a non-empty name"}),
    "unknown field": ({**CRON, "colour": "red"}, {"colour": "not a field of this request"}),
    "several at once": (
        {"type": "nope", "args": "{", "every": -1},
        {"type": "unknown job type 'nope'", "args": "not JSON", "every": "must be a positive"},
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CREATES))
async def test_a_bad_create_is_400_with_one_line_per_bad_field(env: Env, case: str) -> None:
    body, wanted = BAD_CREATES[case]
    # The JSON API takes args as an object; the page's form sends its text.
    if isinstance(body.get("args"), str):
        form = {k: str(v) for k, v in body.items()}
        answer = await post_json(env, "/api/schedules", 400, data=form)
    else:
        answer = await post_json(env, "/api/schedules", 400, json=body)
    assert set(answer["errors"]) == set(wanted), answer
    for field, line in wanted.items():
        assert answer["errors"][field].startswith(line) or line in answer["errors"][field], (
            field,
            answer["errors"][field],
        )
        assert "\n" not in answer["errors"][field]
        assert f"{field}: " in answer["error"]
    assert await listed(env) == {}  # nothing was stored


async def test_a_body_that_is_not_an_object_is_400(env: Env) -> None:
    answer = await post_json(env, "/api/schedules", 400, json=[1])
    assert answer["error"] == "the body must be a JSON object of the schedule's fields"
    answer = await post_json(
        env,
        "/api/schedules",
        400,
        content=b"{nope",
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    assert answer["error"].startswith("the body is not JSON")


# ── edit ───────────────────────────────────────────────────────────────
async def test_an_edit_replaces_the_rule_and_the_arguments(env: Env) -> None:
    old = (await post_json(env, "/api/schedules", json={**CRON, "queue": "reports"}))["schedule_id"]
    await post_json(env, f"/api/schedules/{old}/pause")
    edited = await post_json(
        env, f"/api/schedules/{old}/edit", json={"every": 600, "args": {"text": "edited"}}
    )
    new = edited["schedule_id"]
    assert new != old and edited["replaced"] == old
    now = active(await listed(env))
    assert set(now) == {new}  # the old one is cancelled
    info = now[new]
    assert info["trigger"]["interval"] == 600 and "cron" not in info["trigger"]
    assert (info["args"], info["queue"], info["type"]) == ({"text": "edited"}, "reports", "echo")
    assert info["paused"]  # kept paused, as the old one was
    # The rule alone: the arguments stay.
    again = await post_json(
        env, f"/api/schedules/{new}/edit", data={"kind": "cron", "cron": "30 6 * * *", "tz": ""}
    )
    info = active(await listed(env))[again["schedule_id"]]
    assert info["trigger"]["cron"] == "30 6 * * *" and info["trigger"]["tz"] == "UTC"
    assert info["args"] == {"text": "edited"}
    if env.scheduler is None:
        # The same job and rule are the same stored schedule: nothing changes.
        same = await post_json(
            env, f"/api/schedules/{again['schedule_id']}/edit", json={"args": {"text": "edited"}}
        )
        assert same == {"schedule_id": again["schedule_id"], "replaced": None}


BAD_EDITS: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "bad cron": ({"cron": "* * *"}, {"cron": "invalid cron expression"}),
    "bad zone": ({"cron": "0 2 * * *", "tz": "Nowhere/Land"}, {"tz": "unknown time zone"}),
    "zero interval": ({"every": 0}, {"every": "must be a positive number of seconds"}),
    "args not the fields": ({"args": {"txt": "x"}}, {"args": "echo job: "}),
    "type is not edited": ({"type": "gate", "every": 60}, {"type": "not a field"}),
    "nothing to change": ({}, {"args": "nothing to change"}),
}


@pytest.mark.parametrize("case", sorted(BAD_EDITS))
async def test_a_bad_edit_is_400_and_changes_nothing(env: Env, case: str) -> None:
    schedule_id = (await post_json(env, "/api/schedules", json=CRON))["schedule_id"]
    before = await listed(env)
    body, wanted = BAD_EDITS[case]
    answer = await post_json(env, f"/api/schedules/{schedule_id}/edit", 400, json=body)
    assert set(answer["errors"]) == set(wanted)
    for field, line in wanted.items():
        assert line in answer["errors"][field]
    assert await listed(env) == before


async def test_editing_an_unknown_or_ended_schedule_is_refused(env: Env) -> None:
    answer = await post_json(env, "/api/schedules/sched-nope/edit", 404, json={"every": 60})
    assert answer == {"error": "unknown schedule 'sched-nope'"}
    schedule_id = (await post_json(env, "/api/schedules", json=CRON))["schedule_id"]
    assert await env.client.cancel_schedule(schedule_id)
    if env.scheduler is not None:  # an in-process scheduler forgets a cancelled schedule
        await post_json(env, f"/api/schedules/{schedule_id}/edit", 404, json={"every": 60})
        return
    answer = await post_json(env, f"/api/schedules/{schedule_id}/edit", 409, json={"every": 60})
    assert answer["error"].startswith(f"schedule {schedule_id} has ended")


async def test_an_in_process_schedule_made_in_code_is_edited_in_code(local_env: Env) -> None:
    env = local_env
    schedule_id = await env.add_schedule("from code")  # schedule_recurring of a factory
    answer = await post_json(env, f"/api/schedules/{schedule_id}/edit", 409, json={"every": 60})
    assert answer["error"].startswith(f"schedule {schedule_id} was made in code")
    with pytest.raises(UnknownScheduleError):
        await env.client.update_schedule("sched-nope", every=60)


async def test_create_and_edit_need_the_token(env: Env) -> None:
    schedule_id = (await post_json(env, "/api/schedules", json=CRON))["schedule_id"]
    for path in ("/api/schedules", f"/api/schedules/{schedule_id}/edit"):
        answer = await env.http.post(path, json={**CRON, "every": None})
        assert answer.status_code == 401 and answer.json()["error"].startswith(
            "authentication required"
        )
    assert list(await listed(env)) == [schedule_id]


# ── last runs and the overdue marker ───────────────────────────────────
async def test_the_page_shows_each_schedules_last_runs_newest_first(env: Env) -> None:
    schedule_id = (await post_json(env, "/api/schedules", json=CRON))["schedule_id"]
    fired = []
    for _ in range(7):
        job_id = (await post_json(env, f"/api/schedules/{schedule_id}/trigger"))["job_id"]
        await env.wait(job_id)
        fired.append(job_id)
    runs = await env.client.schedule_runs(schedule_id, 5)
    assert [r.job_id for r in runs] == fired[::-1][:5]
    assert all(r.status is JobStatus.COMPLETED for r in runs)
    assert [r.job_id for r in await env.client.schedule_runs(schedule_id, 1)] == [fired[-1]]
    assert await env.client.schedule_runs("sched-nope") == []
    with pytest.raises(ValueError, match="limit must be between 1 and 100"):
        await env.client.schedule_runs(schedule_id, 0)
    page = (await env.http.get("/schedules")).text
    region = page[page.index('data-testid="last-runs"') :]
    region = region[: region.index("</td>")]
    shown = re.findall(r'href="/jobs/([^"]+)"', region)
    assert shown == fired[::-1][:5]  # the page's LAST_RUNS, newest first
    assert region.count('class="run s-completed"') == 5 and ">ok <" in region


async def test_a_schedule_nobody_fires_is_marked_overdue(shared_env: Env) -> None:
    # (An in-process scheduler fires its own schedules: they are never overdue.)
    env = shared_env
    # Added an hour ago by a process with a job type no process here has,
    # so nobody has fired it since (none can build its job).
    then = time.time() - 3600
    row = SharedScheduleRow(
        schedule_id="sched-ghost",
        type="ghost",
        args={},
        options={},
        trigger={"interval": 60.0, "origin": then},
        next_run=then,
        allow_overlap=False,
    )
    await env.client.store.add_schedule(row)
    await post_json(env, "/api/schedules", json=CRON)  # due next Monday: not overdue
    schedules = await listed(env)
    assert schedules["sched-ghost"]["overdue"] is True
    assert [s["overdue"] for k, s in schedules.items() if k != "sched-ghost"] == [False]
    page = (await env.http.get("/schedules")).text
    assert page.count('data-testid="overdue"') == 1
    assert f"next fire is more than {OVERDUE_AFTER:.1f} s past" in page
    assert "no process fires it (workers down?)" in page
    # Paused, it is not overdue any more.
    await post_json(env, "/api/schedules/sched-ghost/pause")
    assert 'data-testid="overdue"' not in (await env.http.get("/schedules")).text

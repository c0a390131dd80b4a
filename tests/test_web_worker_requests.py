"""Drain and Stop on the dashboard's JSON API and Workers page (issue 24, item 1).

On every store of tests/web_support.py: the in-process scheduler
(``create_app(scheduler=...)``, a `LocalClient`, which refuses: its program
stops it) and shared stores served by a worker scheduler in the test's loop,
whose registry row takes the request. The token and CSRF guard of every
action is tested with the others (tests/test_web_api.py's ``ACTIONS``);
tests/test_web_workers_browser.py clicks the buttons on real workers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from web_support import STORES, TOKEN, Env, make_env, post_json

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(params=STORES)
async def env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Env]:
    async with make_env(request.param, request, tmp_path, TOKEN) as made:
        yield made


async def test_drain_then_stop_leave_the_request_on_the_workers_row(env: Env) -> None:
    [w] = await env.client.workers()
    drain = f"/api/workers/{w.worker_id}/drain"
    if env.scheduler is not None:  # create_app(scheduler=...): the process is its own worker
        answer = await post_json(env, drain, expect=409)
        assert answer["error"].startswith(f"cannot drain worker {w.worker_id!r}: a LocalClient")
        assert [x.command for x in await env.client.workers()] == [None]
        return
    assert await post_json(env, drain) == {"worker_id": w.worker_id, "command": "drain"}
    assert [x.command for x in await env.client.workers()] == ["drain"]
    stop = f"/api/workers/{w.worker_id}/stop"
    assert await post_json(env, stop) == {"worker_id": w.worker_id, "command": "stop"}
    assert [x.command for x in await env.client.workers()] == ["stop"]
    listed = (await env.http.get("/api/workers")).json()["workers"]
    assert [x["command"] for x in listed] == ["stop"]


@pytest.mark.parametrize("worker_id", ["nobody:1", "web-1:77/2", "a%2Fb"])
async def test_an_unknown_worker_is_404_naming_it(env: Env, worker_id: str) -> None:
    shown = worker_id.replace("%2F", "/")
    for verb in ("drain", "stop"):
        if env.scheduler is not None:  # a LocalClient refuses any id, in one line
            answer = await post_json(env, f"/api/workers/{worker_id}/{verb}", expect=409)
            assert answer["error"].startswith(f"cannot {verb} worker {shown!r}: a LocalClient")
            continue
        answer = await post_json(env, f"/api/workers/{worker_id}/{verb}", expect=404)
        assert answer["error"].startswith(f"unknown worker {shown!r} in "), answer


async def test_the_page_offers_drain_and_stop_to_the_workers_of_a_store(env: Env) -> None:
    [w] = await env.client.workers()
    page = (await env.http.get("/workers")).text
    drain = f'hx-post="/api/workers/{w.worker_id.replace(":", "%3A")}/drain"'
    if env.scheduler is not None:
        assert "hx-post" not in page and "its program starts and stops it" in page
        return
    assert drain in page and 'hx-confirm="Drain worker' in page
    assert f"/api/workers/{w.worker_id.replace(':', '%3A')}/stop" in page
    # Asked to drain: the page says so (asked, or done where the store told
    # the worker at once), and offers Stop alone.
    await env.client.drain_worker(w.worker_id)
    page = (await env.http.get("/workers")).text
    assert "drain asked" in page or "drained by an operator" in page
    assert drain not in page and "/stop" in page
    await env.client.stop_worker(w.worker_id)
    page = (await env.http.get("/workers")).text
    assert "stop asked" in page and "hx-post" not in page


async def test_an_empty_worker_id_is_400(env: Env) -> None:
    answer = await post_json(env, "/api/workers//drain", expect=400)
    assert answer == {"error": "worker_id must not be empty"}

"""Concurrent `Client.submit` calls stored together (issue 25): many
submitters at once, each keeping its own order and its own id, a burst big
enough for COPY, and a row the store refuses failing only its own submit,
on every store several processes share."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from jobsched import Client, Job, StoreError, build_job
from jobsched.store import NewJob
from jobsched_plugins.postgres_store.submit import COPY_AT_LEAST
from worker_support import shared_store


@pytest.fixture(params=["postgresql", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return shared_store(request, tmp_path)


@pytest.fixture
async def client(store_url: str) -> AsyncIterator[Client]:
    async with Client(store_url) as opened:
        yield opened


def email(to: str) -> Job:
    return build_job("email", {"to": to, "subject": "hello", "latency": 0})


def count_inserts(client: Client, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every insert the client's store is asked for, from now on."""
    sizes: list[int] = []
    insert = client.store.insert

    async def counted(rows: Sequence[NewJob]) -> Any:
        sizes.append(len(rows))
        return await insert(rows)

    monkeypatch.setattr(client.store, "insert", counted)
    return sizes


async def test_concurrent_submitters_each_keep_their_order_and_their_ids(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes = count_inserts(client, monkeypatch)
    submitters, each = 8, 25
    answers: dict[str, str] = {}

    async def submitter(k: int) -> None:
        for i in range(each):
            to = f"{k}-{i}@example.com"
            answers[to] = await client.submit(email(to))

    await asyncio.gather(*(submitter(k) for k in range(submitters)))
    assert len(set(answers.values())) == submitters * each
    # Stored together: the submitters' first calls, made in one turn of the
    # loop, are one insert.
    assert sizes[0] == submitters and sum(sizes) == submitters * each
    stored = await client.jobs()
    assert {j.args["to"]: j.job_id for j in stored} == answers
    order = [j.args["to"] for j in stored]  # the store's submit order (seq)
    for k in range(submitters):
        mine = [to for to in order if to.startswith(f"{k}-")]
        assert mine == [f"{k}-{i}@example.com" for i in range(each)]


async def test_a_burst_of_submits_big_enough_for_copy_is_stored_in_call_order(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes = count_inserts(client, monkeypatch)
    n = COPY_AT_LEAST * 2 + 3
    ids = await asyncio.gather(*(client.submit(email(f"{i}@example.com")) for i in range(n)))
    assert sizes == [n] and len(set(ids)) == n
    stored = await client.jobs()
    assert [j.job_id for j in stored] == ids
    assert [j.args["to"] for j in stored] == [f"{i}@example.com" for i in range(n)]


@pytest.mark.parametrize("burst", [5, COPY_AT_LEAST + 5], ids=["insert", "copy"])
async def test_a_row_the_store_refuses_fails_only_its_own_submit(
    client: Client, monkeypatch: pytest.MonkeyPatch, burst: int
) -> None:
    # The store refuses one row of the batch (as a database refuses a value):
    # the whole insert fails, then each submit is stored on its own and gets
    # its own answer.
    insert = client.store.insert
    sizes: list[int] = []

    async def refusing(rows: Sequence[NewJob]) -> Any:
        sizes.append(len(rows))
        bad = [r for r in rows if r.args["to"] == "bad@example.com"]
        if bad:
            raise StoreError(f"refused {bad[0].job_id}")
        return await insert(rows)

    monkeypatch.setattr(client.store, "insert", refusing)
    tos = [f"{i}@example.com" for i in range(burst)]
    tos[burst // 2] = "bad@example.com"
    results = await asyncio.gather(
        *(client.submit(email(to)) for to in tos), return_exceptions=True
    )
    refused = results[burst // 2]
    assert isinstance(refused, StoreError) and "refused" in str(refused)
    good = [r for i, r in enumerate(results) if i != burst // 2]
    assert all(isinstance(r, str) for r in good) and len(set(good)) == burst - 1
    assert sizes[0] == burst and sizes[1:] == [1] * burst  # together, then one by one
    stored = await client.jobs()
    assert [j.job_id for j in stored] == good
    assert "bad@example.com" not in {j.args["to"] for j in stored}

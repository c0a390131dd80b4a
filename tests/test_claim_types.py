"""A claim takes only the job types its worker can build, and skips what the
worker refused (`SharedStore.claim` ``types`` and ``refuser``,
`SharedStore.refuse`), on every shared store: PostgreSQL, SQLite and memory://.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jobsched import Limits
from jobsched.store import NewJob, Outcome
from shared_support import Target


def new(job_id: str, kind: str, *, delay: float = 0.0) -> NewJob:
    now = time.time()
    return NewJob(
        job_id=job_id,
        type=kind,
        args={},
        options={"executor": "async"},
        run_at=now + delay,
        submitted_at=now,
        sort_key=(0.0,),
    )


@pytest.fixture
async def store(target: Target) -> AsyncIterator[Any]:
    opened = await target.open_store("w1")
    try:
        yield opened
    finally:
        await opened.close()


def ids(rows: list[Any]) -> list[str]:
    return [r.job_id for r in rows]


@pytest.mark.parametrize("limited", [False, True], ids=["plain", "under-limits"])
async def test_a_claim_takes_only_its_types_and_waits_only_for_them(
    store: Any, limited: bool
) -> None:
    if limited:  # the claim under limits filters the same way
        await store.set_limits(Limits(job_types={"x": 10}).as_data())
    await store.insert(
        [new("x1", "x"), new("y1", "y"), new("x2", "x"), new("y-later", "y", delay=300)]
    )
    rows, next_due = await store.claim(10, "w1", types=["y"])
    assert ids(rows) == ["y1"]
    # The x jobs due now are not this claim's: it sleeps until its own next one.
    assert next_due is not None and next_due > time.time() + 200
    assert await store.claim(10, "w1", types=[]) == ([], None)
    rows, _ = await store.claim(10, "w2", types=["x", "z"])
    assert ids(rows) == ["x1", "x2"]
    assert {r.job_id: r.status for r in await store.jobs()}["y-later"] == "pending"


async def test_a_refused_job_goes_back_untouched_and_its_refuser_never_takes_it_again(
    store: Any,
) -> None:
    await store.insert([new("a", "x")])
    assert ids((await store.claim(5, "w1", types=["x"], refuser="w1#1"))[0]) == ["a"]
    # Only the lease holder refuses it; another process's word changes nothing.
    assert await store.refuse([("a", "not mine")], "w2", "w2#1", 3) == []
    assert await store.refuse([("a", "JobSpecError: no 'size'")], "w1", "w1#1", 3) == []
    row = await store.get("a")
    assert (row.status, row.attempts, row.lease_owner, row.lease_expires) == (
        "pending",
        0,
        None,
        None,
    )
    assert (row.build_refusals, row.last_refusal, row.refused_by) == (
        1,
        "JobSpecError: no 'size'",
        ("w1#1",),
    )
    # Its refuser passes it by (and does not wait for it); anyone else takes it.
    assert await store.claim(5, "w1", types=["x"], refuser="w1#1") == ([], None)
    rows, _ = await store.claim(5, "w2", types=["x"], refuser="w2#1")
    assert ids(rows) == ["a"] and rows[0].attempts == 1
    # At the bound it is left to its holder, which fails it.
    assert await store.refuse([("a", "JobSpecError: again")], "w2", "w2#1", 2) == ["a"]
    row = await store.get("a")
    assert (row.status, row.lease_owner, row.build_refusals) == ("running", "w2", 2)
    assert row.refused_by == ("w1#1", "w2#1")
    assert await store.finish([Outcome(job_id="a", status="failed", error="refused")], "w2") == [
        "a"
    ]
    # An operator's retry starts it afresh: any worker may take it again.
    assert await store.retry(["a"]) == ["a"]
    row = await store.get("a")
    assert (row.status, row.build_refusals, row.last_refusal, row.refused_by) == (
        "pending",
        0,
        None,
        (),
    )
    assert ids((await store.claim(5, "w1", types=["x"], refuser="w1#1"))[0]) == ["a"]


async def test_a_claim_without_a_refuser_skips_what_its_owner_refused(store: Any) -> None:
    await store.insert([new("a", "x")])
    await store.claim(5, "w1")
    assert await store.refuse([("a", "no")], "w1", "w1", 3) == []
    assert await store.claim(5, "w1") == ([], None)
    assert ids((await store.claim(5, "w2"))[0]) == ["a"]

"""``jobsched.integrations.django``: a job submitted when Django's transaction
commits, on a shared store (a `BlockingClient`) and in process (a
`JobScheduler` or `LocalClient`), and never for a rolled-back one."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import django
import pytest
from django.conf import settings
from django.db import connection, connections, transaction

from jobsched import (
    BlockingClient,
    Client,
    Job,
    JobScheduler,
    JobStatus,
    LocalClient,
    Submission,
    build_job,
)
from jobsched.integrations.django import submit_many_on_commit, submit_on_commit

#: Django's own connection to the test PostgreSQL database, when there is one.
_PG = urlsplit(os.environ.get("JOBSCHED_TEST_POSTGRES_DSN", ""))

if not settings.configured:
    # A file, not ":memory:": Django opens a connection per thread, and the
    # in-process tests run the view in a thread of its own.
    _DATABASE = Path(tempfile.mkdtemp(prefix="jobsched-django-")) / "app.db"
    databases: dict[str, dict[str, Any]] = {
        "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(_DATABASE)}
    }
    if _PG.hostname:
        databases["pg"] = {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": _PG.path.lstrip("/"),
            "USER": _PG.username or "",
            "PASSWORD": _PG.password or "",
            "HOST": _PG.hostname,
            "PORT": _PG.port or 5432,
        }
    settings.configure(
        DATABASES=databases,
        INSTALLED_APPS=[],
        USE_TZ=True,
    )
    django.setup()


class Rollback(Exception):
    """Raised in an ``atomic()`` block to roll it back."""


def email(to: str) -> Job:
    return build_job("email", {"to": to, "subject": "hello", "latency": 0})


@pytest.fixture
def orders() -> Iterator[None]:
    """The app's own table, in Django's database."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE orders")


def place_order(client: object, order_id: int, *, fail: bool = False) -> list[str]:
    """A view's work: the order row, and its email once the row is committed."""
    submitted: list[str] = []
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO orders VALUES (%s)", [order_id])
        submit_on_commit(client, email(f"{order_id}@example.com"), then=submitted.append)  # type: ignore[arg-type]
        assert submitted == []  # not before the commit
        if fail:
            raise Rollback
    return submitted


def test_a_blocking_client_submits_after_the_commit_only(tmp_path: Path, orders: None) -> None:
    with BlockingClient(f"sqlite:///{tmp_path / 'jobs.db'}") as client:
        (job_id,) = place_order(client, 1)
        with pytest.raises(Rollback):
            place_order(client, 2, fail=True)
        infos = client.jobs()
        assert [(i.job_id, i.args["to"]) for i in infos] == [(job_id, "1@example.com")]
        with transaction.atomic():
            submit_many_on_commit(
                client,
                [email("a@example.com"), Submission(email("b@example.com"), priority="high")],
                then=lambda ids: infos.extend(client.get(i) for i in ids),
            )
        assert [i.args["to"] for i in infos] == ["1@example.com", "a@example.com", "b@example.com"]
        # Outside atomic(), Django runs the callback at once.
        submit_on_commit(client, email("now@example.com"), priority="low")
        assert client.jobs()[-1].priority.name == "LOW"


async def test_an_in_process_scheduler_gets_the_job_on_its_loop(orders: None) -> None:
    async with JobScheduler() as scheduler, LocalClient(scheduler) as local:
        for target in (scheduler, local):
            (job_id,) = await asyncio.to_thread(place_order, target, 1 if target is local else 3)
            # The submit was handed to the loop before to_thread's answer.
            done = await local.wait(job_id, timeout=30)
            assert done.status is JobStatus.COMPLETED
        with pytest.raises(Rollback):
            await asyncio.to_thread(place_order, local, 2, fail=True)
        assert len(await local.jobs()) == 2


async def test_clients_it_cannot_use_are_refused(tmp_path: Path) -> None:
    async with Client(f"sqlite:///{tmp_path / 'jobs.db'}") as client:
        with pytest.raises(TypeError, match=r"async Client.*give a BlockingClient"):
            submit_on_commit(client, email("a@example.com"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes a BlockingClient, a JobScheduler or a LocalClient"):
        submit_on_commit("postgresql://db/jobs", email("a@example.com"))  # type: ignore[arg-type]
    async with JobScheduler() as scheduler:
        with pytest.raises(TypeError, match="submit_many_on_commit\\(\\) takes a BlockingClient"):
            submit_many_on_commit(scheduler, [email("a@example.com")])  # type: ignore[arg-type]


# ── docs/integrations.md ───────────────────────────────────────────────
@pytest.fixture
def signups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The page's ``signups`` package (its tasks, its client, members.py) on
    sys.path, with the ``members`` table in Django's database."""
    from test_integrations_docs import files

    package = tmp_path / "signups"
    package.mkdir()
    (package / "__init__.py").touch()
    for name in ("tasks.py", "jobs.py", "members.py"):
        (package / name).write_text(files()[f"signups/{name}"])
    monkeypatch.syspath_prepend(str(tmp_path))
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE members (email TEXT)")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE members")
        for name in [m for m in sys.modules if m == "signups" or m.startswith("signups.")]:
            del sys.modules[name]


def test_the_pages_sign_up_submits_once_the_member_is_committed(
    tmp_path: Path, signups: None
) -> None:
    from signups.jobs import client, open_client  # type: ignore[import-not-found]
    from signups.members import sign_up  # type: ignore[import-not-found]

    opened = open_client(f"sqlite:///{tmp_path / 'jobs.db'}")
    try:
        sign_up("ann@example.com")
        with pytest.raises(Rollback), transaction.atomic():
            sign_up("bob@example.com")  # its savepoint is released into ours...
            raise Rollback  # ...which rolls back: no member, no job
        (job,) = client().jobs()
        assert job.args == {"email": "ann@example.com"}
        assert job.unique_key == "welcome:ann@example.com"
        with connection.cursor() as cursor:
            cursor.execute("SELECT email FROM members")
            assert cursor.fetchall() == [("ann@example.com",)]
    finally:
        opened.close()


def test_django_s_own_postgres_connection_takes_the_job_in_its_transaction(
    pg_schema: tuple[str, str],
) -> None:
    """docs/integrations.md: ``conn=connection.connection`` inside ``atomic()``."""
    pg = connections["pg"]
    with BlockingClient(pg_schema[0]) as client:
        with transaction.atomic(using="pg"):
            kept = client.submit(email("kept@example.com"), conn=pg.connection)
        with pytest.raises(Rollback), transaction.atomic(using="pg"):
            client.submit(email("dropped@example.com"), conn=pg.connection)
            raise Rollback
        assert [info.job_id for info in client.jobs()] == [kept]
    pg.close()

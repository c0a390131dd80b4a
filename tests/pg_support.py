"""PostgreSQL test support: the DSN, one throw-away schema per test.

The DSN comes from ``JOBSCHED_TEST_POSTGRES_DSN``. Without it the tests skip,
unless ``JOBSCHED_REQUIRE_SERVICES=1`` (CI), where a missing DSN fails them:
the PostgreSQL tests can never silently stop running there.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import pytest


def base_dsn() -> str:
    dsn = os.environ.get("JOBSCHED_TEST_POSTGRES_DSN")
    if not dsn:
        if os.environ.get("JOBSCHED_REQUIRE_SERVICES") == "1":
            pytest.fail("JOBSCHED_TEST_POSTGRES_DSN is not set but JOBSCHED_REQUIRE_SERVICES=1")
        pytest.skip("JOBSCHED_TEST_POSTGRES_DSN is not set")
    return dsn


def with_query(dsn: str, **params: str) -> str:
    parts = urlsplit(dsn)
    query = dict(parse_qsl(parts.query))
    query.update(params)
    return urlunsplit(parts._replace(query=urlencode(query)))


@pytest.fixture
def pg_schema() -> Iterator[tuple[str, str]]:
    """(store URL, schema name): a fresh schema, dropped after the test."""
    dsn = base_dsn()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        yield with_query(dsn, schema=schema, application_name=schema), schema
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid()",
                [schema],
            )
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def terminate_backends(schema: str) -> int:
    """Kill every connection of the store under test (like a server restart)."""
    with psycopg.connect(base_dsn(), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s AND pid <> pg_backend_pid()",
            [schema],
        ).fetchall()
    return len(rows)

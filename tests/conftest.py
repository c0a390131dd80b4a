"""Shared fixtures."""

from pg_support import pg_schema  # noqa: F401 - a fixture for the PostgreSQL tests

"""Shared fixtures."""

from pg_support import pg_schema  # noqa: F401 - a fixture for the PostgreSQL tests
from shared_support import target  # noqa: F401 - every shared store, parametrized

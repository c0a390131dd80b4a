"""Shared fixtures."""

from flow_support import flow_store_url, flow_worker  # noqa: F401 - a worker --import flow_tasks
from pg_support import pg_schema  # noqa: F401 - a fixture for the PostgreSQL tests
from shared_support import target  # noqa: F401 - every shared store, parametrized

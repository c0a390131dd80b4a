"""Shared fixtures."""

from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from flow_support import flow_store_url, flow_worker  # noqa: F401 - a worker --import flow_tasks
from pg_support import pg_schema  # noqa: F401 - a fixture for the PostgreSQL tests
from shared_support import db_target, target  # noqa: F401 - every shared store, parametrized


@pytest.fixture(autouse=True)
def _structlog_caches_no_logger(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The CLI configures structlog to cache each module's logger on first use,
    right for a process that configures it once. A test that runs the CLI in
    this process would freeze every module logger used afterwards with that
    configuration, and a later test capturing logs would see nothing."""
    configure = structlog.configure

    def configure_without_cache(**settings: Any) -> None:
        configure(**{**settings, "cache_logger_on_first_use": False})

    monkeypatch.setattr(structlog, "configure", configure_without_cache)
    yield

"""The pytest fixtures of `jobsched.testing`: ``virtual_clock`` and ``virtual_scheduler``.

pytest loads this module through ``jobsched.testing`` (its ``pytest_plugins``
names it), so that ``jobsched.testing`` itself imports without pytest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from jobsched import JobScheduler
from jobsched.testing import VirtualClock


@pytest.fixture
def virtual_clock() -> VirtualClock:
    """A fresh `VirtualClock`: monotonic 0.0, wall time 2026-01-01T00:00:00Z."""
    return VirtualClock()


@pytest.fixture
def virtual_scheduler(virtual_clock: VirtualClock) -> Callable[..., JobScheduler]:
    """A factory of `JobScheduler`s that run on `virtual_clock`.

    Use the scheduler as ``async with scheduler:`` so it is stopped in the test.
    """

    def make(**kwargs: Any) -> JobScheduler:
        kwargs.setdefault("clock", virtual_clock)
        return JobScheduler(**kwargs)

    return make

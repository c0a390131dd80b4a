"""Testing helpers, and a pytest plugin: a virtual clock for schedulers.

Installed jobsched registers this module as a pytest plugin (the ``pytest11``
entry point ``jobsched``), so its fixtures are available in every test. When
plugin autoload is off (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``), add
``pytest_plugins = ["jobsched.testing"]`` to your top-level ``conftest.py``.

Fixtures:

``virtual_clock``
    A fresh `VirtualClock` at monotonic 0.0 and wall time 2026-01-01T00:00Z.

``virtual_scheduler``
    A factory: ``virtual_scheduler(**kwargs)`` returns a `JobScheduler` on the
    `virtual_clock` (kwargs go to `JobScheduler`).

Example::

    async def test_nightly_report(virtual_clock, virtual_scheduler):
        scheduler = virtual_scheduler(num_workers=1)
        scheduler.schedule_recurring(report_job, trigger={"cron": "0 2 * * *"})
        async with scheduler:
            await virtual_clock.advance(3 * 86400)
        assert ...
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ._scheduler import JobScheduler
from ._virtual_clock import VirtualClock, VirtualTimer

__all__ = ["VirtualClock", "VirtualTimer", "virtual_clock", "virtual_scheduler"]


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

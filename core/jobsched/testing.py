"""Testing helpers, and a pytest plugin: a virtual clock for schedulers.

Installed jobsched registers this module as a pytest plugin (the ``pytest11``
entry point ``jobsched``), so its fixtures are available in every test. When
plugin autoload is off (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``), add
``pytest_plugins = ["jobsched.testing"]`` to your top-level ``conftest.py``.

This module does not import pytest, so `VirtualClock` works in any test runner
or script; pytest finds the fixtures in ``jobsched._pytest_plugin`` through
this module's ``pytest_plugins``.

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

from ._virtual_clock import VirtualClock, VirtualTimer

__all__ = ["VirtualClock", "VirtualTimer"]

# pytest reads this when it loads this module as a plugin and then loads the
# fixtures from there: importing `jobsched.testing` never imports pytest.
pytest_plugins = ["jobsched._pytest_plugin"]

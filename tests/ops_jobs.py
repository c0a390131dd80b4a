"""Job types of the operator-command tests, installed as the plugin ``ops`` for the CLI.

tests/test_cli_operations.py runs ``jobsched`` with this module on its path
and a dist-info folder naming it (entry point ``ops``): ``schedules trigger``
builds the schedule's job, so the command needs its job type, as a worker does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from jobsched import AsyncJob, Job, RetryPolicy, hookimpl
from jobsched.hookspecs import Register


@attrs.define(eq=False)
class Report(AsyncJob):
    """Fails (without retries) while the file `flag` does not exist, then returns "ok"."""

    flag: str

    def __attrs_post_init__(self) -> None:
        Job.__init__(self, "report")
        self.retry = RetryPolicy(max_retries=0)

    async def run(self) -> Any:
        if not Path(self.flag).exists():
            raise RuntimeError(f"{self.flag} does not exist yet")
        return "ok"


@attrs.define(eq=False)
class Cleanup(AsyncJob):
    """Does nothing, successfully."""

    def __attrs_post_init__(self) -> None:
        Job.__init__(self, "cleanup")

    async def run(self) -> Any:
        return None


@hookimpl
def jobsched_register_job_types(register: Register) -> None:
    register("report", Report)
    register("cleanup", Cleanup)

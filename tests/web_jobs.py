"""Job types for the dashboard's browser tests (also loaded by ``jobsched worker``).

The tests put this folder and a ``*.dist-info`` naming this module as the
``webtest`` entry point on the worker's ``PYTHONPATH``, the way any
third-party plugin is found.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import attrs

import jobsched
from jobsched import AsyncJob, hookimpl
from jobsched.hookspecs import Register


@attrs.define(eq=False)
class Gated(AsyncJob):
    """Fails while the file `flag` exists; once it is gone, returns `label`."""

    flag: str
    label: str = ""

    async def run(self) -> Any:
        if Path(self.flag).exists():
            raise RuntimeError(f"the gate {Path(self.flag).name} is closed")
        return {"label": self.label}


@attrs.define(eq=False)
class Steps(AsyncJob):
    """Reports progress through `steps` steps, then waits until `flag` is gone."""

    flag: str
    steps: int = 10

    async def run(self) -> Any:
        for done in range(self.steps + 1):
            jobsched.progress(done, self.steps, f"step {done} of {self.steps}")
        while Path(self.flag).exists():
            await asyncio.sleep(0.05)
        return self.steps


@hookimpl
def jobsched_register_job_types(register: Register) -> None:
    register("gated", Gated)
    register("steps", Steps)

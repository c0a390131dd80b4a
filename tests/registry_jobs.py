"""Jobs for the worker registry tests (``jobsched worker --import registry_jobs``,
from this folder): one that holds its worker busy until a test lets it go."""

from __future__ import annotations

import asyncio
import pathlib

import attrs

from jobsched import AsyncJob, Job, hookimpl, task
from jobsched.hookspecs import Register


@task(timeout=None, retry="none")
async def hold(started: str, release: str) -> str:
    """Touch the file `started`, then run until the file `release` exists."""
    pathlib.Path(started).touch()
    while not pathlib.Path(release).exists():
        await asyncio.sleep(0.01)
    return "released"


@attrs.define(eq=False)
class Newer(AsyncJob):
    """A job type only producers register (`ProducerTypes`): a newer release's
    task, say, that no worker running has yet."""

    n: int = 0

    def __attrs_post_init__(self) -> None:
        Job.__init__(self, f"newer-{self.n}")

    async def run(self) -> int:
        return self.n


class ProducerTypes:
    """The plugin of a producer that knows `Newer` (as ``registry.newer``)."""

    @hookimpl
    def jobsched_register_job_types(self, register: Register) -> None:
        register("registry.newer", Newer)

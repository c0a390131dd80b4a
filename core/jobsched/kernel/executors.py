"""Executors: built on first use, and the calls they abandoned still running."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import structlog

from .._errors import NonRetryableError, PluginError
from .._plugins import DISABLE_PLUGINS_ENV, PluginManager, Registration

if TYPE_CHECKING:
    from .._executor import Executor
    from .._job import Job

logger = structlog.get_logger("jobsched")


class Executors(dict):  # type: ignore[type-arg]
    """Executors by model name, each built on first use.

    A broken third-party executor then affects only the jobs that ask for it:
    building it fails once, and every attempt on it ends FAILED (not retried)
    with the error, naming the plugin and how to disable it. Looking up a
    built executor is a plain dict lookup (``__missing__`` runs only on a miss).
    """

    def __init__(self, plugins: PluginManager, workers: int) -> None:
        super().__init__()
        self.plugins = plugins
        self.registry: Mapping[str, Registration] = plugins.registry["executors"]
        self.workers = workers

    def __missing__(self, model: str) -> Executor:
        name = str(getattr(model, "value", model))
        reg = self.registry[name]
        try:
            executor: Executor = reg.factory(workers=self.workers)
        except Exception as exc:
            message = (
                f"executor {name!r} from plugin {reg.plugin!r} failed to start: "
                f"{type(exc).__name__}: {exc}; disable the plugin with "
                f"{DISABLE_PLUGINS_ENV}={reg.plugin} or submit the job to another executor"
            )
            logger.error(
                "executor failed to start", executor=name, plugin=reg.plugin, error=str(exc)
            )
            executor = BrokenExecutor(message)
        self[model] = executor
        return executor

    def get_or_build(self, model: str) -> Executor:
        """The executor for `model`, built now if it was not yet; `PluginError` if unknown."""
        if model not in self.registry:
            raise PluginError(self.unknown(model))
        return self[model]  # type: ignore[no-any-return]

    def unknown(self, model: object) -> str:
        """Why no executor `model` is registered, and the fix."""
        name = str(model)
        if name == "async":  # the default: say what disabled it
            return missing_default(self.plugins, "executors", name)
        return self.plugins.unknown_name_message("executors", name)

    def shutdown(self) -> None:
        """Shut down every executor built so far."""
        for executor in self.values():
            executor.shutdown()


class BrokenExecutor:
    """Stands in for an executor that failed to start: every attempt fails, not retried."""

    def __init__(self, message: str) -> None:
        self.message = message

    def invoke(self, job: Job) -> Any:
        raise NonRetryableError(self.message)

    def shutdown(self) -> None:
        pass


class AbandonedCalls:
    """Calls an executor abandoned still running (a timed-out or cancelled
    thread or pool-process call), and what waits for their end: no new
    attempt of a job starts before its last call returned."""

    def __init__(self) -> None:
        self._calls: dict[str, asyncio.Future[None]] = {}
        self._after: dict[str, Callable[[], None]] = {}

    def ids(self) -> list[str]:
        """The ids of the jobs whose calls still run, oldest first."""
        return list(self._calls)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._calls

    def watch(self, job: Job, executor: Executor) -> asyncio.Future[None] | None:
        """After an attempt of `job` was cancelled: the future of its call if
        `executor` abandoned it still running (see `AbandoningExecutor`), else None."""
        still_running = getattr(executor, "still_running", None)
        ended: asyncio.Future[None] | None = None if still_running is None else still_running(job)
        if ended is None or ended.done():
            return None
        job_id = job.job_id
        self._calls[job_id] = ended
        ended.add_done_callback(lambda _: self._ended(job_id, ended))
        return ended

    def after(self, job_id: str, then: Callable[[], None]) -> None:
        """Call `then` once the abandoned call of `job_id` has ended."""
        self._after[job_id] = then

    def drop_waits(self) -> list[str]:
        """Forget what waits for calls still running (at stop); their job ids."""
        waiting, self._after = self._after, {}
        return list(waiting)

    def _ended(self, job_id: str, ended: asyncio.Future[None]) -> None:
        if self._calls.get(job_id) is not ended:
            return  # a later call of the job is the one watched now
        del self._calls[job_id]
        then = self._after.pop(job_id, None)
        if then is not None:
            then()


def default_factory(plugins: PluginManager, kind: str, name: str, option: str) -> Any:
    """The factory of a default the kernel relies on, or an error saying what disabled it.

    `option` is how to do without it (``"pass strategy=..."``).
    """
    reg = plugins.registry[kind].get(name)
    if reg is not None:
        return reg.factory
    raise PluginError(f"{missing_default(plugins, kind, name)}; or {option}")


def missing_default(plugins: PluginManager, kind: str, name: str) -> str:
    """Why a default `name` of `kind` (``"strategies"``...) is not registered, and the fix."""
    singular = {"strategies": "strategy", "executors": "executor"}.get(kind, kind.rstrip("s"))
    for record in plugins.records():
        if record.name == name and record.status != "loaded":
            return (
                f"the default {singular} {name!r} is unavailable: its plugin {name!r} is "
                f"{record.status} ({record.error}); re-enable it (take {name!r} out of "
                f"{DISABLE_PLUGINS_ENV}, the deny-list or the allow-list)"
            )
    return f"{plugins.unknown_name_message(kind, name)}; it is the default {singular}"

"""Finding, loading and indexing plugins: the only code that touches pluggy."""

from __future__ import annotations

import contextlib
import difflib
import functools
import importlib.metadata
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import pluggy
import structlog

from . import hookspecs
from ._errors import PluginError
from ._status import JobStatus, listener_statuses

GROUP = "jobsched"
#: Distributions whose plugins are jobsched's own: they load even when
#: third-party autoload is disabled.
BUILTIN_DISTRIBUTIONS = frozenset({"jobsched"})
#: The kinds of things plugins register, each with its ``jobsched_register_<kind>`` hook.
KINDS = ("strategies", "executors", "retry_policies", "job_types", "triggers", "stores")
_SINGULAR = {
    "strategies": "strategy",
    "executors": "executor",
    "retry_policies": "retry policy",
    "job_types": "job type",
    "triggers": "trigger",
    "stores": "store",
}
DISABLE_AUTOLOAD_ENV = "JOBSCHED_DISABLE_PLUGIN_AUTOLOAD"
DISABLE_PLUGINS_ENV = "JOBSCHED_DISABLE_PLUGINS"
#: The built-in plugins that provide the kernel's defaults, with what each
#: provides. Like pytest's essential plugins they load whenever the built-ins
#: do: an allow-list need not name them, and a deny-list that names one is
#: refused (`PluginError`) rather than leaving every scheduler to fail later.
ESSENTIAL_PLUGINS: Mapping[str, str] = {
    "priority": "the default strategy 'priority'",
    "exponential": "the default retry policy 'exponential'",
    "async": "the 'async' executor, where jobs run unless they ask for another",
    "interval": "the 'interval' trigger, which restores interval schedules from a store",
}
#: A plugin still importing after this many seconds is reported to
#: `PluginManager`'s ``on_slow_import`` (the CLI names it on stderr): a slow
#: import otherwise looks like a hang of every command.
SLOW_IMPORT_SECONDS = 2.0

TransitionListener = Callable[[Any, Any, Any], None]
#: ``listener(job, done, total, message)``: a compiled ``jobsched_job_progress``.
ProgressListener = Callable[[Any, Any, Any, Any], None]


@attrs.frozen(kw_only=True)
class PluginRecord:
    """One plugin as found: what ``jobsched plugins list`` prints."""

    name: str
    distribution: str | None
    version: str | None
    builtin: bool
    status: str  # "loaded", "blocked" or "failed"
    essential: bool = False  # one of `ESSENTIAL_PLUGINS`: cannot be disabled
    hooks: tuple[str, ...] = ()
    provides: dict[str, tuple[str, ...]] = attrs.field(factory=dict)
    error: str | None = None
    entry_point: str | None = None
    import_time: float | None = None  # seconds its import took; None if not imported here
    warnings: tuple[str, ...] = ()  # names it registers that another plugin registers too

    def to_json(self) -> dict[str, Any]:
        """The stable ``plugins list --json`` row."""
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "builtin": self.builtin,
            "essential": self.essential,
            "status": self.status,
            "hooks": list(self.hooks),
            "provides": {kind: list(names) for kind, names in self.provides.items()},
            "error": self.error,
            "import_time": None if self.import_time is None else round(self.import_time, 6),
            "warnings": list(self.warnings),
        }


@attrs.frozen
class Registration:
    """A name a plugin registered, with the factory that builds it."""

    kind: str
    name: str
    factory: Any
    plugin: str


# ── job types defined in code ─────────────────────────────────────────
# ``@jobsched.task`` defines a job type by decorating a function: every plugin
# manager of the process sees it, whenever it was defined (a worker imports the
# tasks' module after loading its plugins). `_definitions_version` tells a
# manager that its registry is out of date.
_definitions: dict[str, Registration] = {}
_definitions_version = 0


def define_job_type(name: str, factory: Any, source: str) -> None:
    """Make `factory` the job type `name` in every plugin manager, now and later.

    `source` stands for the plugin (the defining module: ``jobs list`` shows
    it). Defining a name again replaces it (a module imported again); a name a
    plugin registers too is a `NameClash`, as between two plugins.
    """
    global _definitions_version
    _definitions[name] = Registration("job_types", name, factory, source)
    _definitions_version += 1


def defined_job_type(name: str) -> Any | None:
    """The factory `define_job_type` defined as `name`, or None."""
    reg = _definitions.get(name)
    return None if reg is None else reg.factory


@attrs.frozen(kw_only=True)
class NameClash:
    """One name registered by several plugins: unusable until all but one are disabled.

    Only what uses the name fails (with `message`); everything else runs.
    """

    kind: str
    name: str
    registrations: tuple[Registration, ...]
    message: str  # names the plugins and the JOBSCHED_DISABLE_PLUGINS fix

    @property
    def plugins(self) -> tuple[str, ...]:
        return tuple(reg.plugin for reg in self.registrations)


@attrs.frozen
class _Candidate:
    name: str
    distribution: str | None
    version: str | None
    builtin: bool
    entry_point: importlib.metadata.EntryPoint | None
    plugin: object = None  # set for explicitly given plugins


def _is_essential(candidate: _Candidate) -> bool:
    return candidate.builtin and candidate.name in ESSENTIAL_PLUGINS


def _refuse_essential(names: set[str], source: str) -> None:
    """A deny-list naming an essential plugin is a mistake: say so, in one line."""
    refused = sorted(names & ESSENTIAL_PLUGINS.keys())
    if refused:
        provides = "; ".join(f"{name!r} provides {ESSENTIAL_PLUGINS[name]}" for name in refused)
        listed = ", ".join(repr(name) for name in refused)
        raise PluginError(
            f"{source} {listed}: essential plugins cannot be disabled ({provides}); "
            f"remove {'it' if len(refused) == 1 else 'them'} from the list"
        )


def _normalize(dist_name: str) -> str:
    return re.sub(r"[-_.]+", "-", dist_name).lower()


def _split_names(value: str | None) -> set[str]:
    return {n.strip() for n in (value or "").split(",") if n.strip()}


def find_entry_points() -> list[_Candidate]:
    """Every ``jobsched`` entry point installed, without importing any of them.

    A distribution seen twice on ``sys.path`` counts once; the result is sorted
    by name so loading order is deterministic.
    """
    seen: set[tuple[str, str, str]] = set()
    found: list[_Candidate] = []
    for ep in importlib.metadata.entry_points(group=GROUP):
        dist = getattr(ep, "dist", None)
        dist_name = dist.metadata["Name"] if dist is not None else None
        key = (_normalize(dist_name or ""), ep.name, ep.value)
        if key in seen:
            continue
        seen.add(key)
        found.append(
            _Candidate(
                name=ep.name,
                distribution=dist_name,
                version=dist.version if dist is not None else None,
                builtin=dist_name is not None and _normalize(dist_name) in BUILTIN_DISTRIBUTIONS,
                entry_point=ep,
            )
        )
    found.sort(key=lambda c: (not c.builtin, c.name, c.distribution or ""))
    return found


class PluginManager:
    """The plugins a scheduler is composed from.

    Finds the ``jobsched`` entry points, applies the deny/allow lists and
    ``JOBSCHED_DISABLE_PLUGIN_AUTOLOAD`` *before* importing anything, imports
    each plugin on its own (a failure becomes a record, never a crash) and
    indexes what the plugins register. `plugins` adds plugin objects (modules or
    instances) given explicitly, on top of (or, with ``autoload=False`` and
    ``builtins=False``, instead of) the installed ones.

    Each import is timed (`PluginRecord.import_time`); one still running after
    `SLOW_IMPORT_SECONDS` is reported once to ``on_slow_import(name,
    distribution)``. A name that two plugins register is a `NameClash`: it is
    left out of the registry, and only what uses it fails, with a message
    naming both plugins.
    """

    def __init__(
        self,
        plugins: Iterable[object] = (),
        *,
        deny: Iterable[str] = (),
        allow: Iterable[str] | None = None,
        autoload: bool | None = None,
        builtins: bool = True,
        on_slow_import: Callable[[str, str | None], None] | None = None,
    ) -> None:
        self._pm = pluggy.PluginManager(GROUP)
        self._on_slow_import = on_slow_import
        self._pm.add_hookspecs(hookspecs)
        deny = set(deny)
        denied_by_env = _split_names(os.environ.get(DISABLE_PLUGINS_ENV))
        if builtins:
            _refuse_essential(denied_by_env, f"{DISABLE_PLUGINS_ENV} names")
            _refuse_essential(deny, "the deny-list names")
        self._deny = deny | denied_by_env
        self._allow = None if allow is None else set(allow)
        if autoload is None:
            autoload = os.environ.get(DISABLE_AUTOLOAD_ENV, "") in ("", "0", "false", "no")
        self._records: dict[str, PluginRecord] = {}
        self._registry: dict[str, dict[str, Registration]] | None = None
        self._definitions_seen = -1
        self._clashes: dict[tuple[str, str], NameClash] = {}
        # Plugins that raised in a hook called outside the registry (commands).
        self._hook_failures: dict[str, str] = {}
        for candidate in find_entry_points() if (autoload or builtins) else ():
            if candidate.builtin and not builtins:
                continue
            self._load(candidate, autoload=autoload)
        for plugin in plugins:
            self.register(plugin)

    # ── loading ────────────────────────────────────────────────────────
    def _blocked_reason(self, candidate: _Candidate, autoload: bool) -> str | None:
        if _is_essential(candidate):
            return None
        if candidate.name in self._deny:
            return "disabled by the deny-list"
        if self._allow is not None and candidate.name not in self._allow:
            return "not in the allow-list"
        if not candidate.builtin and not autoload:
            return f"third-party autoload disabled by {DISABLE_AUTOLOAD_ENV}"
        return None

    def _load(self, candidate: _Candidate, *, autoload: bool) -> None:
        record: dict[str, Any] = {
            "name": candidate.name,
            "distribution": candidate.distribution,
            "version": candidate.version,
            "builtin": candidate.builtin,
            "essential": _is_essential(candidate),
            "entry_point": candidate.entry_point.value if candidate.entry_point else None,
        }
        reason = self._blocked_reason(candidate, autoload)
        if reason is not None:
            self._records[candidate.name + "\0" + str(candidate.distribution)] = PluginRecord(
                status="blocked", error=reason, **record
            )
            return
        assert candidate.entry_point is not None
        taken = self._records.get(candidate.name)
        if taken is not None and taken.status == "loaded":
            self._records[candidate.name + "\0" + str(candidate.distribution)] = PluginRecord(
                status="failed",
                error=f"plugin name {candidate.name!r} is taken by the plugin from "
                f"{taken.distribution}; two distributions cannot both provide it",
                **record,
            )
            return
        started = time.perf_counter()
        try:
            with _SlowImportNotice(candidate, self._on_slow_import):
                plugin = candidate.entry_point.load()
            record["import_time"] = time.perf_counter() - started
            self._pm.register(plugin, name=candidate.name)
        except Exception as exc:  # a broken plugin is reported, never fatal
            record["import_time"] = time.perf_counter() - started
            self._records[candidate.name + "\0" + str(candidate.distribution)] = PluginRecord(
                status="failed", error=_describe(exc, candidate), **record
            )
            return
        self._records[candidate.name] = PluginRecord(status="loaded", **record)
        self._registry = None

    def register(self, plugin: object, name: str | None = None) -> str:
        """Add a plugin object (a module, class or instance with hookimpls)."""
        name = name or getattr(plugin, "__name__", None) or f"{type(plugin).__name__}-{id(plugin)}"
        if name in self._records and self._records[name].status == "loaded":
            other = self._records[name]
            raise PluginError(
                f"plugin name {name!r} is already taken by the plugin from "
                f"{other.distribution or 'an explicit registration'}"
            )
        self._pm.register(plugin, name=name)
        self._records[name] = PluginRecord(
            name=name, distribution=None, version=None, builtin=False, status="loaded"
        )
        self._registry = None
        return name

    def unregister(self, name: str) -> None:
        """Remove a loaded plugin by name."""
        self._pm.unregister(name=name)
        self._records.pop(name, None)
        self._registry = None

    # ── what plugins provide ───────────────────────────────────────────
    def _build_registry(self) -> dict[str, dict[str, Registration]]:
        by_plugin: dict[str, list[Registration]] = {}
        failed: dict[str, str] = dict(self._hook_failures)
        for kind in KINDS:
            caller = getattr(self._pm.hook, f"jobsched_register_{kind}")
            for impl in caller.get_hookimpls():  # registration order (pluggy calls LIFO)
                plugin_name = self._pm.get_name(impl.plugin) or "?"
                if plugin_name in failed:
                    continue
                added: list[Registration] = []

                def register(
                    name: str,
                    factory: Any,
                    _kind: str = kind,
                    _plugin: str = plugin_name,
                    _added: list[Registration] = added,
                ) -> None:
                    if not isinstance(name, str) or not name:
                        raise PluginError(f"register() needs a non-empty name, got {name!r}")
                    if not callable(factory):
                        raise PluginError(f"{name!r}: factory {factory!r} is not callable")
                    _added.append(Registration(_kind, name, factory, _plugin))

                try:
                    impl.function(register=register)
                except Exception as exc:
                    failed[plugin_name] = (
                        f"jobsched_register_{kind} raised {type(exc).__name__}: {exc}"
                    )
                    continue
                by_plugin.setdefault(plugin_name, []).extend(added)
        self._definitions_seen = _definitions_version
        for reg in _definitions.values():
            by_plugin.setdefault(reg.plugin, []).append(reg)
        for plugin_name, error in failed.items():
            old = self._records.get(plugin_name)
            if old is None:  # unregistered since
                continue
            self._records[plugin_name] = attrs.evolve(old, status="failed", error=error)
            by_plugin.pop(plugin_name, None)
        # Every plugin's claim on each name (a plugin registering a name twice keeps its last).
        claims: dict[tuple[str, str], dict[str, Registration]] = {}
        for plugin_name, registrations in by_plugin.items():
            for reg in registrations:
                claims.setdefault((reg.kind, reg.name), {})[plugin_name] = reg
        registry: dict[str, dict[str, Registration]] = {kind: {} for kind in KINDS}
        self._clashes = {}
        for (kind, name), claimants in claims.items():
            if len(claimants) == 1:
                (registry[kind][name],) = claimants.values()
            else:
                # Neither wins: a silent pick would run the wrong code under a
                # trusted name. Only what uses the name fails (`unknown_name_message`).
                self._clashes[kind, name] = self._clash(kind, name, tuple(claimants.values()))
        return registry

    def register_commands(self, cli_for: Callable[[str], object]) -> dict[str, str]:
        """Call each plugin's ``jobsched_register_commands(cli)``, with ``cli_for(plugin)``.

        A plugin whose hook raises fails as in the registration hooks: its
        record says so and nothing it registers is used. Returns the error of
        each plugin that failed here, by plugin name.
        """
        failed: dict[str, str] = {}
        for impl in self._pm.hook.jobsched_register_commands.get_hookimpls():
            plugin_name = self._pm.get_name(impl.plugin) or "?"
            try:
                impl.function(**({"cli": cli_for(plugin_name)} if impl.argnames else {}))
            except Exception as exc:  # a broken plugin is reported, never fatal
                failed[plugin_name] = (
                    f"jobsched_register_commands raised {type(exc).__name__}: {exc}"
                )
        if failed:
            self._hook_failures.update(failed)
            self._registry = None  # rebuilt without the failed plugins
        return failed

    def _clash(self, kind: str, name: str, registrations: tuple[Registration, ...]) -> NameClash:
        plugins = [reg.plugin for reg in registrations]
        described = [self.describe_plugin(p) for p in plugins]
        count = "two" if len(plugins) == 2 else str(len(plugins))
        # Suggest disabling a third-party plugin: the built-in is the one users expect.
        third_party = [p for p in plugins if not self._is_builtin(p)]
        culprit = (third_party or plugins)[-1]
        message = (
            f"{_SINGULAR[kind]} {name!r} is registered by {count} plugins: "
            f"{', '.join(described[:-1])} and {described[-1]}; nothing that uses it can run "
            f"until all but one are disabled, e.g. {DISABLE_PLUGINS_ENV}={culprit}"
        )
        return NameClash(kind=kind, name=name, registrations=registrations, message=message)

    def _is_builtin(self, name: str) -> bool:
        record = self._records.get(name)
        return record is not None and record.builtin

    def describe_plugin(self, name: str) -> str:
        """``'name' (from distribution)``: a plugin as messages name it."""
        record = self._records.get(name)
        dist = f" (from {record.distribution})" if record and record.distribution else ""
        return f"{name!r}{dist}"

    @property
    def registry(self) -> dict[str, dict[str, Registration]]:
        """Everything registered, by kind then name."""
        if self._registry is None or self._definitions_seen != _definitions_version:
            self._registry = self._build_registry()
        return self._registry

    def records(self) -> list[PluginRecord]:
        """Every plugin found, loaded or not, with what it provides (clashing names too)."""
        registry = self.registry
        provides: dict[str, dict[str, list[str]]] = {}
        warnings: dict[str, list[str]] = {}
        for kind, regs in registry.items():
            for reg in regs.values():
                provides.setdefault(reg.plugin, {}).setdefault(kind, []).append(reg.name)
        for clash in self._clashes.values():
            for reg in clash.registrations:
                provides.setdefault(reg.plugin, {}).setdefault(reg.kind, []).append(reg.name)
                warnings.setdefault(reg.plugin, []).append(clash.message)
        out = []
        for key, record in self._records.items():
            if record.status == "loaded":
                plugin = self._pm.get_plugin(key)
                hooks = sorted(c.name for c in self._pm.get_hookcallers(plugin) or ())
                record = attrs.evolve(
                    record,
                    hooks=tuple(hooks),
                    provides={k: tuple(sorted(v)) for k, v in provides.get(key, {}).items()},
                    warnings=tuple(warnings.get(key, ())),
                )
            out.append(record)
        return sorted(out, key=lambda r: (not r.builtin, r.name, r.distribution or ""))

    def clashes(self, kind: str | None = None) -> list[NameClash]:
        """Names registered by more than one plugin (of one `kind`, or all), sorted."""
        _ = self.registry
        found = [c for c in self._clashes.values() if kind is None or c.kind == kind]
        return sorted(found, key=lambda c: (KINDS.index(c.kind), c.name))

    @property
    def conflicts(self) -> list[str]:
        """The message of each `NameClash`: what uses such a name fails with it."""
        return [clash.message for clash in self.clashes()]

    def names(self, kind: str) -> list[str]:
        """The registered names of one kind, sorted."""
        return sorted(self.registry[kind])

    def resolve(self, kind: str, name: str) -> Any:
        """The factory registered under `name`; a clear error listing the names if unknown."""
        reg = self.registry[kind].get(name)
        if reg is not None:
            return reg.factory
        raise PluginError(self.unknown_name_message(kind, name))

    def unknown_name_message(self, kind: str, name: str) -> str:
        """'unknown strategy 'x' ...' with the closest and the known names.

        For a name two plugins registered: that, naming both and the fix.
        """
        known = self.names(kind)
        clash = self._clashes.get((kind, name))
        if clash is not None:
            return clash.message
        message = f"unknown {_SINGULAR[kind]} {name!r}"
        close = difflib.get_close_matches(name, known, n=3)
        if close:
            message += f"; did you mean {', '.join(repr(c) for c in close)}?"
        message += f" (registered: {', '.join(known) if known else 'none'})"
        broken = [r for r in self._records.values() if r.status == "failed"]
        if broken:
            message += "; plugins that failed to load: " + "; ".join(
                f"{r.name} ({r.error}) - disable it with {DISABLE_PLUGINS_ENV}={r.name}"
                for r in broken
            )
        return message

    # ── hooks as plain calls ───────────────────────────────────────────
    def transition_listeners(
        self,
    ) -> tuple[tuple[TransitionListener, tuple[JobStatus, ...] | None], ...]:
        """``jobsched_job_transition`` implementations as plain ``(job, old, new)``
        callables, each with the target statuses it wants (its ``statuses``
        attribute, checked; None: every transition).

        A pluggy hook call costs microseconds; a plain call a tenth of that.
        """
        listeners: list[tuple[TransitionListener, tuple[JobStatus, ...] | None]] = []
        for impl in reversed(self._pm.hook.jobsched_job_transition.get_hookimpls()):
            culprit = f"plugin {impl.plugin_name!r}: jobsched_job_transition"
            try:
                wanted = listener_statuses(getattr(impl.function, "statuses", None), culprit)
            except (TypeError, ValueError) as exc:
                raise PluginError(str(exc)) from None
            listeners.append((_adapt_listener(impl.function, tuple(impl.argnames)), wanted))
        return tuple(listeners)

    def progress_listeners(self) -> tuple[ProgressListener, ...]:
        """``jobsched_job_progress`` implementations as plain ``(job, done, total,
        message)`` callables; empty when no plugin implements it (then progress
        costs no hook call at all)."""
        listeners: list[ProgressListener] = []
        for impl in reversed(self._pm.hook.jobsched_job_progress.get_hookimpls()):
            listeners.append(_adapt_progress(impl.function, tuple(impl.argnames)))
        return tuple(listeners)

    def submit_hooks(self) -> tuple[Callable[[Any], None], ...]:
        """What the ``jobsched_submit_hook`` implementations return: plain ``(job)`` callables."""
        returned = reversed(self._pm.hook.jobsched_submit_hook())
        return tuple(hook for hook in returned if hook is not None)

    def submit_batch(self) -> Callable[[], contextlib.AbstractContextManager[None]] | None:
        """What ``submit_many`` enters around a batch (``jobsched_submit_batch_hook``), or None."""
        hooks: tuple[Callable[[], contextlib.AbstractContextManager[None]], ...] = tuple(
            h for h in reversed(self._pm.hook.jobsched_submit_batch_hook()) if h is not None
        )
        if not hooks:
            return None
        if len(hooks) == 1:
            return hooks[0]

        @contextlib.contextmanager
        def every_batch_hook() -> Iterator[None]:
            with contextlib.ExitStack() as stack:
                for hook in hooks:
                    stack.enter_context(hook())
                yield

        return every_batch_hook

    def loaded_plugin(self, name: str) -> object | None:
        """The plugin object (module) loaded under `name`, or None if it did not load."""
        record = self._records.get(name)
        if record is None or record.status != "loaded":
            return None
        return self._pm.get_plugin(name)

    def scheduler_started(self, scheduler: hookspecs.SchedulerView) -> None:
        self._pm.hook.jobsched_scheduler_started(scheduler=scheduler)

    def scheduler_stopped(self, scheduler: hookspecs.SchedulerView) -> None:
        self._pm.hook.jobsched_scheduler_stopped(scheduler=scheduler)

    def schedule_misfired(
        self,
        scheduler: hookspecs.SchedulerView,
        schedule: hookspecs.ScheduleView,
        fire_time: float,
        lateness: float,
        fires: int,
    ) -> None:
        """Report a misfire; a plugin that raises is logged, never fatal (misfires are rare)."""
        try:
            self._pm.hook.jobsched_schedule_misfired(
                scheduler=scheduler,
                schedule=schedule,
                fire_time=fire_time,
                lateness=lateness,
                fires=fires,
            )
        except Exception:
            structlog.get_logger("jobsched").exception("jobsched_schedule_misfired hook failed")


def _adapt_listener(fn: Callable[..., object], argnames: Sequence[str]) -> TransitionListener:
    if tuple(argnames) == ("job", "old", "new"):
        return fn  # type: ignore[return-value]

    def listener(job: Any, old: Any, new: Any) -> None:
        values = {"job": job, "old": old, "new": new}
        fn(**{name: values[name] for name in argnames})

    return listener


def _adapt_progress(fn: Callable[..., object], argnames: Sequence[str]) -> ProgressListener:
    if tuple(argnames) == ("job", "done", "total", "message"):
        return fn  # type: ignore[return-value]

    def listener(job: Any, done: Any, total: Any, message: Any) -> None:
        values = {"job": job, "done": done, "total": total, "message": message}
        fn(**{name: values[name] for name in argnames})

    return listener


class _SlowImportNotice:
    """Reports an import still running after `SLOW_IMPORT_SECONDS`, once.

    A timer thread reports it while the import runs; an import that ended
    past the threshold before the timer got to run is reported on exit, so
    the report does not depend on thread timing.
    """

    def __init__(
        self, candidate: _Candidate, report: Callable[[str, str | None], None] | None
    ) -> None:
        self._candidate = candidate
        self._report = report
        self._lock = threading.Lock()
        self._reported = False
        self._timer: threading.Timer | None = None
        self._started = 0.0

    def _report_once(self) -> None:
        with self._lock:
            if self._reported or self._report is None:
                return
            self._reported = True
        self._report(self._candidate.name, self._candidate.distribution)

    def __enter__(self) -> None:
        self._started = time.perf_counter()
        if self._report is not None:
            self._timer = threading.Timer(SLOW_IMPORT_SECONDS, self._report_once)
            self._timer.daemon = True
            self._timer.start()

    def __exit__(self, *exc_info: object) -> None:
        if self._timer is None:
            return
        self._timer.cancel()
        if time.perf_counter() - self._started >= SLOW_IMPORT_SECONDS:
            self._report_once()
        self._timer.join()  # a report under way finishes before the next plugin loads


def _describe(exc: BaseException, candidate: _Candidate) -> str:
    where = candidate.entry_point.value if candidate.entry_point else candidate.name
    return f"{type(exc).__name__}: {exc} (while loading {where})"


@functools.lru_cache(maxsize=1)
def default_plugin_manager() -> PluginManager:
    """The installed plugins, loaded once per process and shared by schedulers."""
    return PluginManager()


def load_plugins(
    plugins: Iterable[object] = (),
    *,
    deny: Iterable[str] = (),
    allow: Iterable[str] | None = None,
    autoload: bool | None = None,
) -> PluginManager:
    """A fresh plugin manager (see `PluginManager`)."""
    return PluginManager(plugins, deny=deny, allow=allow, autoload=autoload)

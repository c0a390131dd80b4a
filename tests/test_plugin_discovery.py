"""Plugin discovery for real: third-party distributions built as dist-info folders on sys.path.

Like flake8's finder tests, each test writes a real ``*.dist-info`` folder
(METADATA + entry_points.txt) and the plugin module into a temporary
directory and puts it on ``sys.path``; `importlib.metadata` then finds it
exactly as it finds a pip-installed package. Every test builds a fresh
`PluginManager` (`default_plugin_manager()` is cached per process).
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from jobsched import (
    FIFOStrategy,
    JobScheduler,
    JobStatus,
    PluginError,
    PluginManager,
    PluginRecord,
    hookimpl,
    load_plugins,
)
from kernel_support import Noop, Transitions

pytestmark = pytest.mark.timeout(30)

# Every entry point jobsched itself declares: the built-ins.
with open(Path(__file__).resolve().parents[1] / "pyproject.toml", "rb") as _f:
    BUILTINS = set(tomllib.load(_f)["project"]["entry-points"]["jobsched"])

LIFO_PLUGIN = """
    from jobsched import SchedulingStrategy, hookimpl

    TRANSITIONS = []

    class LIFO(SchedulingStrategy):
        def key(self, job):
            return (-job.seq,)

    @hookimpl
    def jobsched_register_strategies(register):
        register("acme-lifo", LIFO)

    @hookimpl
    def jobsched_job_transition(job, old, new):
        TRANSITIONS.append((job.job_id, old.name, new.name))
"""


class Site:
    """A directory on sys.path where a test installs distributions by hand."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def install(
        self,
        dist: str,
        entry_points: dict[str, str],
        modules: dict[str, str],
        version: str = "1.0",
    ) -> None:
        info = self.path / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8"
        )
        lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
        (info / "entry_points.txt").write_text(f"[jobsched]\n{lines}", encoding="utf-8")
        for module, source in modules.items():
            (self.path / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")

    def imported(self, module: str) -> bool:
        mod = sys.modules.get(module)
        return mod is not None and str(self.path) in str(getattr(mod, "__file__", ""))


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    monkeypatch.delenv("JOBSCHED_DISABLE_PLUGINS", raising=False)
    monkeypatch.delenv("JOBSCHED_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    path = tmp_path / "site-packages"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    yield Site(path)
    for name, module in list(sys.modules.items()):
        if str(path) in str(getattr(module, "__file__", "") or ""):
            del sys.modules[name]


def record(pm: PluginManager, name: str) -> PluginRecord:
    (found,) = [r for r in pm.records() if r.name == name]
    return found


def install_acme(site: Site) -> None:
    site.install("acme-sched", {"acme": "acme_plugin"}, {"acme_plugin": LIFO_PLUGIN}, "1.2.3")


# ── found, usable by name, listener called ────────────────────────────
async def test_a_third_party_plugin_is_found_and_its_strategy_used_by_name(site: Site) -> None:
    install_acme(site)
    pm = PluginManager()
    acme = record(pm, "acme")
    assert acme.to_json() == {
        "name": "acme",
        "distribution": "acme-sched",
        "version": "1.2.3",
        "builtin": False,
        "essential": False,
        "status": "loaded",
        "hooks": ["jobsched_job_transition", "jobsched_register_strategies"],
        "provides": {"strategies": ["acme-lifo"]},
        "error": None,
        "import_time": acme.to_json()["import_time"],
        "warnings": [],
    }
    assert isinstance(acme.import_time, float)
    assert acme.entry_point == "acme_plugin"
    assert {r.name for r in pm.records() if r.builtin and r.status == "loaded"} == BUILTINS
    assert "acme-lifo" in pm.names("strategies")

    scheduler = JobScheduler("acme-lifo", plugins=pm, num_workers=1)
    recorder = Transitions()
    scheduler.add_listener(recorder)
    jobs = [Noop(str(i)) for i in range(4)]
    for job in jobs:
        scheduler.submit(job)
    async with scheduler:
        await scheduler.join()
    assert recorder.started() == [j.job_id for j in reversed(jobs)], "LIFO, from the plugin"

    heard = sys.modules["acme_plugin"].TRANSITIONS
    assert heard == [(jid, old.name, new.name) for jid, old, new in recorder.events]
    assert (jobs[0].job_id, "RUNNING", "COMPLETED") in heard


def test_an_entry_point_may_name_a_module_level_object(site: Site) -> None:
    site.install(
        "obj-sched",
        {"objplug": "obj_plugin:plugin"},
        {
            "obj_plugin": """
                from jobsched import hookimpl
                from jobsched_plugins.fifo import FIFOStrategy

                class Plugin:
                    @hookimpl
                    def jobsched_register_strategies(self, register):
                        register("obj-fifo", FIFOStrategy)

                plugin = Plugin()
            """
        },
    )
    pm = PluginManager()
    assert record(pm, "objplug").status == "loaded"
    assert isinstance(JobScheduler("obj-fifo", plugins=pm).strategy.key(Noop()), tuple)


# ── failures are records, not crashes ─────────────────────────────────
def test_a_plugin_that_raises_on_import_is_reported_and_the_others_still_load(
    site: Site,
) -> None:
    install_acme(site)
    site.install(
        "broken-sched",
        {"broken": "broken_plugin"},
        {"broken_plugin": "raise RuntimeError('broken at import')\n"},
        "0.9",
    )
    site.install("ghost-sched", {"ghost": "no_such_module"}, {})
    pm = PluginManager()
    broken = record(pm, "broken")
    assert broken.status == "failed"
    assert broken.distribution == "broken-sched" and broken.version == "0.9"
    assert broken.error == "RuntimeError: broken at import (while loading broken_plugin)"
    assert broken.to_json()["error"] == broken.error
    ghost = record(pm, "ghost")
    assert ghost.status == "failed"
    assert ghost.error is not None and ghost.error.startswith("ModuleNotFoundError")
    assert record(pm, "acme").status == "loaded"
    assert {r.name for r in pm.records() if r.status == "loaded"} == BUILTINS | {"acme"}
    JobScheduler("acme-lifo", plugins=pm)  # composing still works

    with pytest.raises(PluginError) as info:
        JobScheduler("broken-strategy", plugins=pm)
    message = str(info.value)
    assert "unknown strategy 'broken-strategy'" in message
    assert "broken (RuntimeError: broken at import" in message
    assert "disable it with JOBSCHED_DISABLE_PLUGINS=broken" in message


def test_a_plugin_raising_inside_a_register_hook_is_recorded_as_failed(site: Site) -> None:
    install_acme(site)
    site.install(
        "raiser-sched",
        {"raiser": "raiser_plugin"},
        {
            "raiser_plugin": """
                from jobsched import hookimpl
                from jobsched_plugins.async_executor import AsyncExecutor

                @hookimpl
                def jobsched_register_executors(register):
                    register("raiser-exec", AsyncExecutor)

                @hookimpl
                def jobsched_register_strategies(register):
                    raise ValueError("no strategies today")
            """
        },
    )
    site.install(
        "badname-sched",
        {"badname": "badname_plugin"},
        {
            "badname_plugin": """
                from jobsched import hookimpl

                @hookimpl
                def jobsched_register_strategies(register):
                    register("", object)
            """
        },
    )
    pm = PluginManager()
    raiser = record(pm, "raiser")
    assert raiser.status == "failed"
    assert raiser.error == "jobsched_register_strategies raised ValueError: no strategies today"
    assert "raiser-exec" not in pm.names("executors"), "a failed plugin provides nothing"
    badname = record(pm, "badname")
    assert badname.status == "failed"
    assert badname.error is not None and "register() needs a non-empty name" in badname.error
    assert "acme-lifo" in pm.names("strategies")
    assert {"async", "thread", "process"} <= set(pm.names("executors"))
    JobScheduler("acme-lifo", plugins=pm)


# ── duplicates ────────────────────────────────────────────────────────
def _strategy_plugin(name: str) -> str:
    return f"""
        from jobsched import hookimpl
        from jobsched_plugins.fifo import FIFOStrategy

        @hookimpl
        def jobsched_register_strategies(register):
            register({name!r}, FIFOStrategy)
    """


def test_two_plugins_registering_one_name_is_an_error_naming_both_where_it_is_used(
    site: Site,
) -> None:
    site.install("one-sched", {"one": "one_plugin"}, {"one_plugin": _strategy_plugin("shared")})
    site.install("two-sched", {"two": "two_plugin"}, {"two_plugin": _strategy_plugin("shared")})
    pm = PluginManager()
    expected = (
        "strategy 'shared' is registered by two plugins: "
        "'one' (from one-sched) and 'two' (from two-sched); nothing that uses it can run "
        "until all but one are disabled, e.g. JOBSCHED_DISABLE_PLUGINS=two"
    )
    assert pm.conflicts == [expected]
    [clash] = pm.clashes()
    assert (clash.kind, clash.name, clash.plugins) == ("strategies", "shared", ("one", "two"))
    with pytest.raises(PluginError) as info:
        JobScheduler("shared", plugins=pm)
    assert str(info.value) == expected
    with pytest.raises(PluginError, match="registered by two plugins"):
        pm.resolve("strategies", "shared")
    # Whatever does not use the name is unaffected.
    assert pm.resolve("strategies", "fifo") is not None
    JobScheduler(plugins=pm)
    assert "shared" not in pm.names("strategies")
    assert record(pm, "one").warnings == (expected,)
    assert record(pm, "one").provides == {"strategies": ("shared",)}


def test_a_third_party_plugin_cannot_take_a_builtin_name(site: Site) -> None:
    site.install(
        "copycat-sched", {"copycat": "copycat_plugin"}, {"copycat_plugin": _strategy_plugin("fifo")}
    )
    pm = PluginManager()
    with pytest.raises(
        PluginError, match=r"'fifo' \(from jobsched\) and 'copycat' \(from copycat-sched\)"
    ):
        JobScheduler("fifo", plugins=pm)


def test_two_distributions_with_one_plugin_name_load_one_and_report_the_other(site: Site) -> None:
    site.install("alpha-sched", {"twin": "twin_a"}, {"twin_a": _strategy_plugin("twin-a")})
    site.install("beta-sched", {"twin": "twin_b"}, {"twin_b": _strategy_plugin("twin-b")})
    pm = PluginManager()
    twins = {r.distribution: r for r in pm.records() if r.name == "twin"}
    assert twins["alpha-sched"].status == "loaded"  # sorted by distribution: deterministic
    assert twins["beta-sched"].status == "failed"
    assert twins["beta-sched"].error is not None
    assert "taken by the plugin from alpha-sched" in twins["beta-sched"].error
    assert not site.imported("twin_b"), "refused before import"
    assert "twin-a" in pm.names("strategies") and "twin-b" not in pm.names("strategies")


def test_explicit_plugins_with_a_taken_name_are_refused() -> None:
    class P:
        pass

    pm = PluginManager(autoload=False)
    pm.register(P(), name="mine")
    with pytest.raises(PluginError, match="'mine' is already taken"):
        pm.register(P(), name="mine")
    with pytest.raises(PluginError, match="'fifo' is already taken by the plugin from jobsched"):
        pm.register(P(), name="fifo")


# ── deny-list, allow-list and the environment switches ─────────────────
def test_deny_list_blocks_before_import(site: Site) -> None:
    install_acme(site)
    site.install(
        "broken-sched", {"broken": "broken_plugin"}, {"broken_plugin": "raise ImportError('x')\n"}
    )
    pm = PluginManager(deny=["acme", "broken", "aging"])
    for name in ("acme", "broken", "aging"):
        assert record(pm, name).status == "blocked"
        assert record(pm, name).error == "disabled by the deny-list"
    assert not site.imported("acme_plugin") and not site.imported("broken_plugin")
    assert "aging" not in pm.names("strategies") and "acme-lifo" not in pm.names("strategies")
    with pytest.raises(PluginError, match="unknown strategy 'aging'"):
        JobScheduler("aging", plugins=pm)
    JobScheduler("fifo", plugins=pm)


def test_disable_plugins_environment_variable(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    install_acme(site)
    site.install(
        "broken-sched", {"broken": "broken_plugin"}, {"broken_plugin": "raise ImportError('x')\n"}
    )
    monkeypatch.setenv("JOBSCHED_DISABLE_PLUGINS", " acme , broken,")
    pm = load_plugins()
    assert record(pm, "acme").status == "blocked"
    assert record(pm, "broken").status == "blocked"
    assert not site.imported("acme_plugin")
    assert record(pm, "fifo").status == "loaded"
    pm_with_deny = PluginManager(deny=["edf"])  # the variable adds to an explicit deny-list
    assert {r.name for r in pm_with_deny.records() if r.status == "blocked"} == {
        "acme",
        "broken",
        "edf",
    }


@pytest.mark.parametrize("value", ["1", "true", "yes"])
def test_disable_autoload_blocks_third_party_but_not_builtins(
    site: Site, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    install_acme(site)
    monkeypatch.setenv("JOBSCHED_DISABLE_PLUGIN_AUTOLOAD", value)
    pm = PluginManager()
    acme = record(pm, "acme")
    assert acme.status == "blocked"
    assert acme.error == "third-party autoload disabled by JOBSCHED_DISABLE_PLUGIN_AUTOLOAD"
    assert not site.imported("acme_plugin")
    assert {r.name for r in pm.records() if r.status == "loaded"} == BUILTINS
    assert type(JobScheduler("aging", plugins=pm).strategy).__name__ == "AgingPriorityStrategy"
    with pytest.raises(PluginError, match="unknown strategy 'acme-lifo'"):
        JobScheduler("acme-lifo", plugins=pm)


@pytest.mark.parametrize("value", ["", "0", "false", "no"])
def test_autoload_stays_on_for_falsy_values(
    site: Site, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    install_acme(site)
    monkeypatch.setenv("JOBSCHED_DISABLE_PLUGIN_AUTOLOAD", value)
    assert record(PluginManager(), "acme").status == "loaded"


def test_allow_list_loads_only_the_named_plugins_and_the_essential_ones(site: Site) -> None:
    install_acme(site)
    pm = PluginManager(allow=["acme", "fifo"])
    loaded = {r.name for r in pm.records() if r.status == "loaded"}
    assert loaded == {"acme", "fifo"} | ESSENTIAL
    assert record(pm, "aging").error == "not in the allow-list"
    assert pm.names("strategies") == ["acme-lifo", "fifo", "priority"]


# ── essential plugins: the kernel's defaults cannot be disabled ──────
# The kernel's defaults: strategy "priority", retry policy "exponential", the
# "async" executor, and the "interval" trigger that restores interval schedules.
ESSENTIAL = {"priority", "exponential", "async", "interval"}


def test_essential_plugins_are_marked_in_the_records(site: Site) -> None:
    install_acme(site)
    records = {r.name: r for r in PluginManager().records()}
    assert {name for name, r in records.items() if r.essential} == ESSENTIAL
    assert all(records[name].builtin and records[name].status == "loaded" for name in ESSENTIAL)
    assert records["acme"].to_json()["essential"] is False
    assert records["exponential"].to_json()["essential"] is True


@pytest.mark.parametrize("denied", sorted(ESSENTIAL))
def test_denying_an_essential_plugin_by_environment_is_refused_naming_it(
    site: Site, monkeypatch: pytest.MonkeyPatch, denied: str
) -> None:
    install_acme(site)
    monkeypatch.setenv("JOBSCHED_DISABLE_PLUGINS", f"acme,{denied}")
    with pytest.raises(PluginError) as info:
        PluginManager()
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"JOBSCHED_DISABLE_PLUGINS names {denied!r}: ")
    assert "essential plugins cannot be disabled" in message
    assert not site.imported("acme_plugin"), "refused before importing anything"


def test_denying_essential_plugins_by_argument_names_each_and_what_it_provides(
    site: Site,
) -> None:
    with pytest.raises(PluginError) as info:
        PluginManager(deny=["exponential", "aging", "async"])
    assert str(info.value) == (
        "the deny-list names 'async', 'exponential': essential plugins cannot be disabled "
        "('async' provides the 'async' executor, where jobs run unless they ask for another; "
        "'exponential' provides the default retry policy 'exponential'); "
        "remove them from the list"
    )


def test_without_builtins_nothing_is_essential(site: Site) -> None:
    class Lone:
        @hookimpl
        def jobsched_register_strategies(self, register: Any) -> None:
            register("lone", FIFOStrategy)

    # Nothing built in is loaded, so denying an essential name changes nothing.
    pm = PluginManager(autoload=False, builtins=False, deny=["priority"])
    pm.register(Lone(), "lone")
    assert [(r.name, r.essential) for r in pm.records()] == [("lone", False)]


def test_explicit_plugin_list_without_autoload(site: Site) -> None:
    install_acme(site)

    class Extra:
        from jobsched import hookimpl

        @hookimpl
        def jobsched_register_strategies(self, register: object) -> None:
            from jobsched_plugins.fifo import FIFOStrategy

            register("extra-fifo", FIFOStrategy)  # type: ignore[operator]

    scheduler = JobScheduler("extra-fifo", plugins=[Extra()])
    assert "acme-lifo" not in scheduler.plugins.names("strategies"), "no third-party autoload"
    assert "aging" in scheduler.plugins.names("strategies"), "built-ins still there"
    assert not site.imported("acme_plugin")


# ── unknown names ─────────────────────────────────────────────────────
def test_unknown_strategy_lists_every_registered_name(site: Site) -> None:
    install_acme(site)
    pm = PluginManager()
    with pytest.raises(PluginError) as info:
        JobScheduler("lifo", plugins=pm)
    message = str(info.value)
    assert message.startswith("unknown strategy 'lifo'")
    known = pm.names("strategies")
    assert {"acme-lifo", "aging", "edf", "fifo", "priority"} <= set(known)
    assert f"(registered: {', '.join(known)})" in message
    with pytest.raises(PluginError, match="unknown retry policy 'linear'") as info:
        pm.resolve("retry_policies", "linear")
    assert f"(registered: {', '.join(pm.names('retry_policies'))})" in str(info.value)


async def test_transitions_reach_the_plugin_only_through_the_scheduler_that_uses_it(
    site: Site,
) -> None:
    install_acme(site)
    pm = PluginManager()
    other = JobScheduler(plugins=PluginManager(autoload=False))
    async with other:
        other.submit(Noop())
        await other.join()
    assert sys.modules["acme_plugin"].TRANSITIONS == []
    scheduler = JobScheduler(plugins=pm)
    async with scheduler:
        job_id = scheduler.submit(Noop())
        await scheduler.join()
    assert [t[0] for t in sys.modules["acme_plugin"].TRANSITIONS] == [job_id, job_id]
    assert scheduler.get(job_id).status is JobStatus.COMPLETED

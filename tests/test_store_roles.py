"""Store roles: a store serving only some of them serves what needs only those,
and what needs another says so in one line, naming the store and the role."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobsched import Client, JobStatus, PluginManager, build_job, default_plugin_manager
from jobsched.cli import main
from jobsched.store import ROLE_MEMBERS, ROLES, MissingRoleError, SharedStore, SubmitRole
from partial_store import PartialStore

OPERATE = (
    "retry, requeue, purge, request_cancel, request_cancel_many, delete_finished, "
    "set_queue_paused, queue_paused"
)


@pytest.fixture
def partial_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The ``partial`` store installed as a plugin (an entry point), as a third
    party's would be; yields a store URL."""
    info = tmp_path / "jobsched_partial-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: jobsched-partial\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[jobsched]\npartial = partial_store\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("JOBSCHED_DISABLE_PLUGINS", "JOBSCHED_DISABLE_PLUGIN_AUTOLOAD"):
        monkeypatch.delenv(name, raising=False)
    default_plugin_manager.cache_clear()
    yield f"partial://{tmp_path.name}"
    default_plugin_manager.cache_clear()
    PartialStore.queues.clear()


def test_the_partial_store_is_a_submit_store_and_not_a_shared_one() -> None:
    store = PartialStore("partial://q")
    assert isinstance(store, SubmitRole) and not isinstance(store, SharedStore)


async def test_client_submit_and_get_work_on_a_store_with_only_those_roles(
    partial_plugin: str,
) -> None:
    async with Client(partial_plugin) as client:
        job_id = await client.submit(
            build_job("email", {"to": "a@example.com", "subject": "hi"}), name="hi"
        )
        info = await client.get(job_id)
        assert (info.status, info.name, info.type) == (JobStatus.PENDING, "hi", "email")
        # A call of a role the store lacks names the store and that role.
        with pytest.raises(MissingRoleError) as caught:
            await client.retry(job_id)
    assert str(caught.value) == (
        f"store {partial_plugin!r} cannot serve a Client's retry: it lacks the operate role "
        f"({OPERATE}) (docs/plugins.md#store-roles says which roles serve what)"
    )


def test_a_client_with_limits_needs_the_limits_role(partial_plugin: str) -> None:
    from jobsched import Limits

    with pytest.raises(MissingRoleError, match=r"cannot serve a Client: it lacks the limits role"):
        Client(partial_plugin, plugins=PluginManager(), limits=Limits(job_types={"email": 1}))


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("jobsched: error: ")
    return lines[0].removeprefix("jobsched: error: ")


def test_jobsched_jobs_retry_refuses_a_store_without_the_operate_role(
    partial_plugin: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["jobs", "retry", "job-1", "--store", partial_plugin]) == 2
    assert one_error_line(capsys.readouterr().err) == (
        f"store {partial_plugin!r} cannot serve this command: it lacks the operate role "
        f"({OPERATE}) (docs/plugins.md#store-roles says which roles serve what)"
    )


def test_jobsched_web_refuses_a_store_without_the_roles_it_shows(
    partial_plugin: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("uvicorn")
    assert main(["web", "--store", partial_plugin, "--port", "0"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith(
        f"store {partial_plugin!r} cannot serve jobsched web: it lacks the inspect role "
        "(page, counts, schedules, stats, queue_stats, wait_changed) and the schedules role ("
    )
    assert "operate" not in line  # read-only without a token: no actions to serve


def test_jobsched_worker_refuses_a_store_without_every_role(
    partial_plugin: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["worker", "--store", partial_plugin]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith(
        f"store {partial_plugin!r} cannot serve jobsched worker: it lacks the queue role ("
    )


# ── docs/plugins.md, "Store roles" ────────────────────────────────────
DOC = Path(__file__).resolve().parents[1] / "docs" / "plugins.md"


def test_the_role_table_of_docs_plugins_md_is_the_contract() -> None:
    rows = re.findall(r"^\| `(\w+)` \| `(\w+)` \| (.+) \|$", DOC.read_text(), flags=re.M)
    assert {role: (protocol, members) for role, protocol, members in rows} == {
        role: (ROLES[role].__name__, ", ".join(f"`{m}`" for m in ROLE_MEMBERS[role]))
        for role in ROLES
    }


def test_the_error_line_of_docs_plugins_md_is_what_jobsched_says() -> None:
    (shown,) = re.findall(r"^jobsched: error: store 'redis://queue' .*$", DOC.read_text(), re.M)
    lacking = {role: list(ROLE_MEMBERS[role]) for role in ("inspect", "schedules")}
    said = str(MissingRoleError("'redis://queue'", "jobsched web", lacking))
    schedules = ", ".join(ROLE_MEMBERS["schedules"])
    assert shown == "jobsched: error: " + said.replace(f"({schedules})", "(...)")


WORKERS = "on_worker_request, heartbeat, request_worker, workers, forget_worker, unserved_types"


async def test_a_store_without_the_workers_role_keeps_no_registry(partial_plugin: str) -> None:
    async with Client(partial_plugin) as client:
        with pytest.raises(MissingRoleError) as caught:
            await client.workers()
        with pytest.raises(MissingRoleError, match="cannot serve a Client's request_worker"):
            await client.drain_worker("h:1")
    assert str(caught.value) == (
        f"store {partial_plugin!r} cannot serve a Client's workers: it lacks the workers role "
        f"({WORKERS}) (docs/plugins.md#store-roles says which roles serve what)"
    )


async def test_a_store_without_the_history_role_keeps_no_history(partial_plugin: str) -> None:
    async with Client(partial_plugin) as client:
        with pytest.raises(MissingRoleError) as caught:
            await client.history(window="7d")
    assert str(caught.value) == (
        f"store {partial_plugin!r} cannot serve a Client's history: it lacks the history role "
        "(add_history, history, backlog) (docs/plugins.md#store-roles says which roles serve what)"
    )


def test_jobsched_workers_refuses_a_store_without_the_workers_role(
    partial_plugin: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["workers", "--store", partial_plugin]) == 2
    assert one_error_line(capsys.readouterr().err) == (
        f"store {partial_plugin!r} cannot serve this command: it lacks the workers role "
        f"({WORKERS}) (docs/plugins.md#store-roles says which roles serve what)"
    )

"""A `Client`'s submits: each planned into store rows, batched and stored.

`Client` holds one `Submitter` and hands it every `submit` and `submit_many`
(and, for `BlockingClient`, their sync ``conn=`` forms). It owns what
submitting needs and nothing else: the plan of each call's rows (checked and
encoded at the call, by the one batch planner of `jobsched._submission`;
a `submit_many` of jobs without options as the store reads them, see
`PlainNewJobs`), the job ids it makes, and the `BatchWriter` that stores
concurrent `submit` calls together, one insert for all the calls waiting at
that moment.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence, Set
from typing import Any

from ._batcher import BatchWriter
from ._codec import JobCodec, sort_key
from ._errors import SchedulerError, UnknownJobError
from ._job import FunctionJob, Job, new_job_id
from ._options import NOT_GIVEN, id_list
from ._plugins import PluginManager
from ._result_of import markers_in
from ._submission import Submission, check_workflow_options, overrides, plan
from ._trigger_rules import ALL_SUCCESS
from ._workflow import Workflow
from .store import JobKind, NewJob, PlainNewJobs, SharedStore, TransactionSubmit


# ── jobs as data ───────────────────────────────────────────────────────
def storable(job: Any) -> Job:
    """`job` if a store can keep it (a `Job` of a registered type), else the refusal."""
    if isinstance(job, FunctionJob) or (callable(job) and not isinstance(job, Job)):
        raise SchedulerError(
            f"{job!r}: a plain function cannot be stored in a shared store "
            "(other hosts cannot run it); register a job type and submit that"
        )
    if not isinstance(job, Job):
        raise TypeError(f"submit() takes a Job, got {job!r}")
    return job


#: `submit`'s options as it defaults them (`Submitter.submit_on` takes any of them).
_SUBMIT_DEFAULTS: dict[str, Any] = {
    "delay": 0.0,
    "depends_on": (),
    "key": None,
    "unique_key": None,
    "priority": None,
    "timeout": NOT_GIVEN,
    "retry": None,
    "name": None,
    "result_ttl": None,
    "keep_result": None,
    "trigger_rule": ALL_SUCCESS,
    "queue": None,
    "group": None,
}

#: The stored jobs a submit without dependencies needs.
_NOTHING: frozenset[str] = frozenset()
#: A `submit` waiting to be stored: its rows, the stored ids they depend on
#: and the caller's answer.
_Queued = tuple[Sequence[NewJob], Set[str], asyncio.Future[str]]


class Submitter:
    """Plans, batches and stores the submits of one `Client`.

    `store` is the client's store; `codec` and `strategy` encode each job
    and its claim key; `identity` is the client's name in the store
    (``submitted_by``) and `id_suffix` the random part of its job ids.
    `check_open` raises unless the client is open: every submit calls it
    before anything is stored. `drain` stores the submits already accepted
    (the client's `close` awaits it before closing the store).
    """

    def __init__(
        self,
        store: SharedStore,
        *,
        plugins: PluginManager,
        codec: JobCodec,
        strategy: Any,
        identity: str,
        id_suffix: str,
        check_open: Callable[[], None],
    ) -> None:
        self.store = store
        self.plugins = plugins
        self.codec = codec
        self.strategy = strategy
        self.identity = identity
        self._id_suffix = id_suffix
        self._check_open = check_open
        self._submit_hooks = plugins.submit_hooks()
        self._submit_batch = plugins.submit_batch()
        # `submit` calls stored together: those made while an insert runs
        # form the next one.
        self._submits: BatchWriter[_Queued] = BatchWriter(
            self._store_queued, name="jobsched-client-submits"
        )

    async def drain(self) -> None:
        """Return once every submit accepted so far is stored (or refused)."""
        await self._submits.drain()

    async def submit(
        self,
        job: Job | Workflow,
        *,
        delay: float,
        depends_on: Iterable[str],
        key: str | None,
        unique_key: str | None,
        priority: Any,
        timeout: Any,
        retry: Any,
        name: str | None,
        result_ttl: float | None,
        keep_result: bool | None,
        trigger_rule: str,
        conn: Any,
        queue: str | None,
        group: str | None,
    ) -> str:
        """`Client.submit` (its docstring is the contract): every option
        given, as the client's signature defaults them."""
        rows: Sequence[NewJob]
        outside: Set[str]
        if (
            conn is None
            and delay == 0.0
            and depends_on == ()
            and key is None
            and unique_key is None
            and priority is None
            and timeout is NOT_GIVEN
            and retry is None
            and name is None
            and result_ttl is None
            and keep_result is None
            and queue is None
            and group is None
            and trigger_rule == ALL_SUCCESS
            and not isinstance(job, Workflow)
            and not getattr(job, "takes_results", True)
        ):
            self._check_open()
            now = time.time()
            rows, outside = [self._plain_row(job, now, now - time.monotonic())], _NOTHING
        else:
            # Checked and encoded now: a bad job is refused at the call.
            rows, outside = self._submit_rows(
                job,
                delay=delay,
                depends_on=depends_on,
                key=key,
                unique_key=unique_key,
                priority=priority,
                timeout=timeout,
                retry=retry,
                name=name,
                result_ttl=result_ttl,
                keep_result=keep_result,
                trigger_rule=trigger_rule,
                queue=queue,
                group=group,
            )
            if conn is not None:
                return (await self._in_transaction().insert_in_transaction(conn, rows))[-1]
            if isinstance(job, Workflow):
                return (await self._store(rows, outside))[-1]
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._submits.add((rows, outside, future))
        return await future

    async def _store_queued(self, batch: list[_Queued]) -> None:
        try:
            ids = await self._store(
                [row for rows, _, _ in batch for row in rows],
                set().union(*(outside for _, outside, _ in batch)),
            )
        except Exception as exc:
            if len(batch) == 1:
                _settle(batch[0][2], exc=exc)
                return
            # One bad job (an unknown dependency) must not fail the others:
            # store them one by one, each caller getting its own answer.
            for rows, outside, future in batch:
                try:
                    (job_id,) = await self._store(rows, outside)
                except Exception as one:
                    _settle(future, exc=one)
                else:
                    _settle(future, result=job_id)
            return
        for (_, _, future), job_id in zip(batch, ids, strict=True):
            _settle(future, result=job_id)

    async def submit_many(
        self, jobs: Iterable[Job | Submission | Workflow], conn: Any
    ) -> list[str]:
        """`Client.submit_many` (its docstring is the contract)."""
        self._check_open()
        if self._submit_batch is None:
            rows, outside = self._rows(jobs)
            return await self._store_rows(rows, outside, conn)
        with self._submit_batch():
            rows, outside = self._rows(jobs)
            return await self._store_rows(rows, outside, conn)

    async def _store_rows(self, rows: Sequence[NewJob], outside: Set[str], conn: Any) -> list[str]:
        """Store `rows` through this client, or in the application's transaction on `conn`."""
        if conn is not None:
            return await self._in_transaction().insert_in_transaction(conn, rows)
        return await self._store(rows, outside)

    def _submit_rows(
        self, job: Job | Workflow, **options: Any
    ) -> tuple[Sequence[NewJob], Set[str]]:
        """The rows `submit` stores for `job` with its `options` (checked and
        encoded; the last one's id is the answer), and the stored ids they
        depend on: one plan for this client's store and for an application's
        transaction (`conn`)."""
        if isinstance(job, Workflow):
            check_workflow_options(
                job,
                delay=options["delay"],
                given=tuple(
                    options[o]
                    for o in (
                        "key",
                        "unique_key",
                        "priority",
                        "retry",
                        "name",
                        "result_ttl",
                        "keep_result",
                        "queue",
                        "group",
                    )
                ),
                timeout=options["timeout"],
                trigger_rule=options["trigger_rule"],
            )
            self._check_open()
            deps = tuple(id_list(options["depends_on"], "depends_on"))
            return self._rows(
                [Submission(j, depends_on=after or deps) for j, after in job.plan(())]
            )
        self._check_open()
        options["depends_on"] = tuple(id_list(options["depends_on"], "depends_on"))
        return self._rows([Submission(job, **options)])

    # ── submitting in the application's transaction ───────────────────
    def _in_transaction(self) -> TransactionSubmit:
        """The store, if it inserts in a caller's transaction; else the refusal."""
        if not isinstance(self.store, TransactionSubmit):
            raise SchedulerError(
                f"{self.store.url}: this store cannot insert in the caller's transaction "
                "(conn=): it has no database connection of the application's to use"
            )
        return self.store

    def submit_on(self, conn: Any, job: Job | Workflow, **options: Any) -> str:
        """`submit` with a sync `conn`, in the calling thread (`BlockingClient`)."""
        rows, _ = self._submit_rows(job, **_SUBMIT_DEFAULTS | options)
        return self._in_transaction().insert_in_transaction_sync(conn, rows)[-1]

    def submit_many_on(self, conn: Any, jobs: Iterable[Job | Submission | Workflow]) -> list[str]:
        """`submit_many` with a sync `conn`, in the calling thread (`BlockingClient`)."""
        self._check_open()
        rows, _ = self._rows(jobs)
        return self._in_transaction().insert_in_transaction_sync(conn, rows)

    def _rows(self, jobs: Iterable[Any]) -> tuple[Sequence[NewJob], frozenset[str]]:
        """The store rows for `jobs` (as `submit_many` takes them), each checked
        by the one batch planner, and the stored ids they depend on."""
        jobs = jobs if type(jobs) is list else list(jobs)
        if not self._submit_hooks and all(map(_bare, jobs)):
            # Jobs without options, what most batches hold: the planner
            # would check nothing and change nothing (a few µs per job).
            return self._plain_rows(jobs), frozenset()
        planned = plan(
            jobs, self.plugins, as_job=storable, new_id=self._new_id, hooks=self._submit_hooks
        )
        now = time.time()
        offset = now - time.monotonic()
        outside = set(planned.outside)
        ids_of: dict[int, str] = {}  # the batch's jobs so far, for result_of markers
        batch_ids = {p.job_id for p in planned.jobs}

        def id_of(job: Job) -> str:
            if id(job) not in ids_of:
                raise ValueError(
                    f"result_of: {job!r} is not an earlier job of this batch; "
                    "name a stored job by the id submit returned"
                )
            return ids_of[id(job)]

        rows: list[NewJob] = []
        for p in planned.jobs:
            item, job = p.item, p.job
            type_name, args, options = self.codec.describe_data(job, offset, id_of)
            depends_on = p.depends_on
            if job.takes_results:
                # The markers' upstreams, named by id in the encoded args.
                marked = [
                    upstream
                    for value in args.values()
                    for marker in markers_in(value)
                    for upstream in marker.ids(str)
                ]
                extra = [m for m in dict.fromkeys(marked) if m not in depends_on]
                outside.update(m for m in extra if m not in batch_ids)
                depends_on = (*depends_on, *extra)
                if item.trigger_rule != ALL_SUCCESS and not depends_on:
                    raise ValueError(f"trigger_rule={item.trigger_rule!r} needs depends_on")
            ids_of[id(item.job)] = p.job_id
            rows.append(
                NewJob(
                    job_id=p.job_id,
                    key=item.key,
                    type=type_name,
                    args=args,
                    options=options,
                    run_at=now + item.delay,
                    submitted_at=now,
                    sort_key=sort_key(self.strategy.key, job, submitted_at=now, offset=offset),
                    depends_on=depends_on,
                    submitted_by=self.identity,
                    unique_key=item.unique_key,
                    trigger_rule=item.trigger_rule,
                    queue=job.queue,
                )
            )
        return rows, frozenset(outside)

    def _plain_rows(self, items: list[Any]) -> PlainNewJobs:
        """The rows of jobs without options (`_bare` items), alike jobs
        sharing one `JobKind`: what the row of each would hold (see
        `_plain_row`), without a `NewJob` per job. Each job is described
        when the store reads its row (`PlainNewJobs`): the PostgreSQL store
        writes a slice while the next is described."""
        now = time.time()
        offset = now - time.monotonic()
        describe = self.codec.describe_shared
        strategy_key = self.strategy.key
        kinds: dict[tuple[str, str, str, tuple[float, ...]], JobKind] = {}

        def kind_of(item: Any) -> JobKind:
            job = item.job if type(item) is Submission else item
            type_name, args, args_text, options, options_text = describe(job, offset)
            key = sort_key(strategy_key, job, submitted_at=now, offset=offset)
            alike = (type_name, args_text, options_text, key)
            kind = kinds.get(alike)
            if kind is None:
                kind = kinds[alike] = JobKind(
                    type=type_name, args=args, options=dict(options), sort_key=key, queue=job.queue
                )
            return kind

        suffix = self._id_suffix
        return PlainNewJobs(
            [f"{new_job_id()}-{suffix}" for _ in items],
            tuple(items),  # read while stored: the caller's list may change meanwhile
            kind_of,
            submitted_at=now,
            submitted_by=self.identity,
        )

    def _new_id(self, job: Job) -> str:
        return f"{new_job_id()}-{self._id_suffix}"

    def _plain_row(self, job: Job, now: float, offset: float) -> NewJob:
        """The row of a job submitted without options (the common case, kept lean)."""
        if self._submit_hooks:
            rows, _ = self._rows([job])
            return rows[0]
        type_name, args, options = self.codec.describe_data(storable(job), offset)
        return NewJob(
            job_id=self._new_id(job),
            type=type_name,
            args=args,
            options=options,
            run_at=now,
            submitted_at=now,
            sort_key=sort_key(self.strategy.key, job, submitted_at=now, offset=offset),
            submitted_by=self.identity,
            queue=job.queue,
        )

    async def _store(self, rows: Sequence[NewJob], outside: Set[str]) -> list[str]:
        """Insert `rows` (`outside`: the stored jobs they depend on, which must exist)."""
        if outside:
            known = {row.job_id for row in await self.store.jobs(sorted(outside))}
            unknown = sorted(outside - known)
            if unknown:
                raise UnknownJobError(f"unknown dependencies: {unknown}")
        return list(await self.store.insert(rows))


def _bare(item: Any) -> bool:
    """Whether `item` of a `submit_many` list is a job without options (a
    `Job`, or a `Submission` giving none), whose row `Submitter._plain_row`
    builds as the planner would: no dependencies or `result_of` markers
    (which may name another job of the batch), keys, delay or overrides.
    A job a store cannot keep is not bare: the planner refuses it."""
    if type(item) is Submission:
        if (
            item.delay != 0.0
            or item.depends_on
            or item.key is not None
            or item.unique_key is not None
            or item.trigger_rule != ALL_SUCCESS
            or overrides(item)
        ):
            return False
        item = item.job
    return _plain_type(type(item))


#: `_plain_type`'s answers, by class (a batch asks for each of its jobs).
_PLAIN_TYPES: dict[type, bool] = {}


def _plain_type(cls: type) -> bool:
    """Whether a job of class `cls` is storable without `result_of` markers
    (what `_bare` asks of every job: decided once per class)."""
    plain = _PLAIN_TYPES.get(cls)
    if plain is None:
        plain = _PLAIN_TYPES[cls] = (
            issubclass(cls, Job) and not issubclass(cls, FunctionJob) and not cls.takes_results
        )
    return plain


def _settle(
    future: asyncio.Future[str], *, result: str = "", exc: BaseException | None = None
) -> None:
    """Answer a queued `submit` (unless its caller stopped waiting)."""
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)

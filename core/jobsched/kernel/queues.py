"""The ready and delayed queues, and the one admission chain a job passes to start.

The ready queue is the strategy's own (a deque per priority level pops in
O(1)) or else a heap of ``(*key, job)``. The delayed heap holds first runs not
due yet and retry backoffs, woken by one timer. `take` is the admission
chain, composed once: the pause of every queue, then the pause of the
job's named queue, then the backend's ``starting`` check, then the limits
(a queue's concurrency and a group's are among them). While none of them
can hold a job back and no job has a group (`plain`), workers pop the
ready queue themselves.

Once a job with a group (a tenant) is queued, the ready queue becomes
`GroupTurns`: a queue per group, popped in turn, so one group's backlog
never holds the others back. `take` pops the turns through the same chain.
Until then nothing about groups costs a thing.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Callable, Mapping
from heapq import heapify, heappop, heappush
from typing import Any

from .._clock import Clock, TimerHandle
from .._job import FunctionJob, Job, job_group
from .._limits import Limiter, Limits
from .._strategy import ReadyQueue, SchedulingStrategy, SortKey

_PROBE_SEQ = -7_654_321  # a submit order no real job has


def _probe() -> None:
    """The function of the job `key_ending_in_seq` asks a strategy about."""


def key_ending_in_seq(key: Callable[[Job], SortKey]) -> Callable[[Job], SortKey]:
    """The strategy's key function, made to end in ``job.seq``.

    Ready-heap entries are ``(*key, job)``: the key's last element must be
    unique so that two jobs are never compared. A key that ends in ``job.seq``
    already (every built-in strategy's) is used as it is, at no cost; any
    other is wrapped once, here, to append it.
    """
    probe = FunctionJob(_probe)
    probe.seq = _PROBE_SEQ
    try:
        ends_in_seq = tuple(key(probe))[-1:] == (_PROBE_SEQ,)
    except Exception:  # a key that cannot judge a plain job: wrap it to be safe
        ends_in_seq = False
    if ends_in_seq:
        return key

    def key_and_seq(job: Job) -> SortKey:
        return (*key(job), job.seq)

    return key_and_seq


class KeyHeap:
    """The ready queue of a strategy that brings none: a heap of ``(*key, job)``.

    Entries are the strategy key flattened with the job, not (key, job): one
    tuple instead of two saves 48 bytes per pending job, and comparing flat
    entries halves the cost of a heap pop (about 1 us at 100k queued). Same
    order as nested keys as long as a strategy's keys have one length, which
    every built-in's do. The key ends in ``job.seq`` (unique), so the job
    itself is never compared.
    """

    __slots__ = ("entries", "key")

    def __init__(self, key: Callable[[Job], SortKey]) -> None:
        self.key = key
        self.entries: list[tuple[Any, ...]] = []

    def push(self, job: Job) -> None:
        heappush(self.entries, (*self.key(job), job))

    def push_entry(self, entry: tuple[Any, ...]) -> None:
        """Queue an entry `submit` built (it computes the key before recording anything)."""
        heappush(self.entries, entry)

    def pop(self) -> Job | None:
        entries = self.entries
        return heappop(entries)[-1] if entries else None

    def remove(self, job: Job) -> None:
        entries = self.entries
        if any(entry[-1] is job for entry in entries):
            self.entries = [entry for entry in entries if entry[-1] is not job]
            heapify(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


class GroupTurns:
    """The ready queue once jobs have groups: one queue per group, taken in turn.

    `base`, the queue from before (the strategy's own or the kernel's
    heap), keeps the jobs without a group and takes its turn as one more
    group; each group gets a queue of the same kind (`make`). `pop` gives
    the best job of the group whose turn it is, in strategy order, and
    moves that group to the back: with groups A (10,000 jobs) and B (10),
    the jobs run A, B, A, B, ... A group's queue is dropped once empty.
    The kernel's submit may push a job without a group straight into
    `base`, which is why `base` keeps its place in the turns while empty.
    """

    __slots__ = ("base", "groups", "make", "turns")

    def __init__(self, base: ReadyQueue, make: Callable[[], ReadyQueue]) -> None:
        self.base = base
        self.make = make
        self.groups: dict[str, ReadyQueue] = {}
        # Group names with queued jobs, the next turn first; None is `base`.
        self.turns: deque[str | None] = deque([None])

    def push(self, job: Job) -> None:
        group = job_group(job)
        if group is None:
            self.base.push(job)
            return
        queue = self.groups.get(group)
        if queue is None:
            queue = self.groups[group] = self.make()
            self.turns.append(group)
        queue.push(job)

    def pop(self) -> Job | None:
        turns = self.turns
        groups = self.groups
        for _ in range(len(turns)):
            group = turns[0]
            turns.rotate(-1)
            if group is None:
                job = self.base.pop()
                if job is not None:
                    return job
                continue
            queue = groups[group]
            job = queue.pop()
            if not len(queue):
                del groups[group]
                turns.pop()  # it was rotated to the back
            if job is not None:
                return job
        return None

    def remove(self, job: Job) -> None:
        group = job_group(job)
        queue = self.base if group is None else self.groups.get(group)
        if queue is not None:
            queue.remove(job)

    def __len__(self) -> int:
        return len(self.base) + sum(len(q) for q in self.groups.values())


#: ``starting(job) -> bool``: see `Backend.starting`.
StartingHook = Callable[[Job], bool]


class Queues:
    """The runnable jobs, the delayed ones, and what admits a job to a worker.

    `ready`, `heap` (the kernel's own heap, None with a strategy's queue),
    `key`, `delayed` and `work` are public for the kernel's submit and
    worker paths to read; `plain` says whether a worker may pop `ready`
    itself. A cancelled job stays queued and is skipped when popped (lazy
    deletion, O(1) cancel).
    """

    def __init__(
        self,
        strategy: SchedulingStrategy,
        clock: Clock,
        *,
        limits: Limits | None,
        registered_types: Mapping[type, str],
        starting: StartingHook | None,
        drop: Callable[[Job], None],
        queue_slots: Mapping[str, int | None] | None = None,
    ) -> None:
        key = getattr(strategy, "key", None)
        if not callable(key):
            raise TypeError(f"strategy must have a key(job) method, got {strategy!r}")
        self.key: Callable[[Job], SortKey] = key_ending_in_seq(key)
        make_queue = getattr(strategy, "ready_queue", None)
        if not callable(make_queue):
            make_queue = None
        queue: ReadyQueue | None = make_queue() if make_queue is not None else None
        if queue is not None and not all(
            callable(getattr(queue, name, None)) for name in ("push", "pop", "remove", "__len__")
        ):
            raise TypeError(
                f"strategy {strategy!r}: ready_queue() must return a ReadyQueue "
                f"(push, pop, remove, len) or None, got {queue!r}"
            )
        # Only the kernel's heap needs the key at submit (to refuse a key that raises).
        self.heap: KeyHeap | None = None
        if queue is None:
            queue = self.heap = KeyHeap(self.key)
        self.ready: ReadyQueue = queue
        self._make_queue: Callable[[], ReadyQueue] = make_queue or (lambda: KeyHeap(self.key))
        #: The groups' turns, once a job with a group was queued (see `GroupTurns`).
        self.turns: GroupTurns | None = None
        #: Heap of ``(run_at, seq, job)``.
        self.delayed: list[tuple[float, int, Job]] = []
        #: Set when a waiting worker should look again.
        self.work = asyncio.Event()
        #: Workers in `wait_for_work`: a submit sets `work` only when one is.
        self.waiting = 0
        self._clock = clock
        self.limiter: Limiter | None = None
        slots = dict(queue_slots or {})
        if limits is not None or any(n is not None for n in slots.values()):
            self.limiter = Limiter(
                limits or Limits(),
                clock=clock,
                requeue=self.push,
                registered_types=registered_types,
                queue_slots=slots,
            )
        self._starting = starting
        self._drop = drop
        self.paused = False
        #: Queues paused on their own -> the jobs `take` held back for them
        #: (queued again, in order, when the queue resumes).
        self.paused_queues: dict[str, list[Job]] = {}
        self.plain = self.limiter is None and starting is None
        self._timer: TimerHandle | None = None
        self._timer_at = math.inf
        self._running = False

    def __len__(self) -> int:
        """Entries in the ready queue (cancelled ones included until popped)."""
        return len(self.ready)

    # ── lifecycle ─────────────────────────────────────────────────────
    def start(self) -> None:
        """Arm the delayed heap's timer from now on."""
        self._running = True
        if self.delayed:
            self._arm(self.delayed[0][0])

    def stop(self) -> None:
        """Wake every waiting worker (to see the stop) and disarm the timer."""
        self._running = False
        self.work.set()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def wait_for_work(self) -> None:
        """Wait until something is queued (or the queue resumed, or a stop)."""
        # Clear-then-wait is safe: nothing can set the event between a take
        # that found nothing and clear(), as there is no await in between.
        # Every waiter wakes on set() and re-checks.
        work = self.work
        work.clear()
        self.waiting += 1
        try:
            await work.wait()
        finally:
            self.waiting -= 1

    # ── queueing ──────────────────────────────────────────────────────
    def push(self, job: Job) -> None:
        """Queue a runnable job now."""
        if self.turns is None and job_group(job) is not None:
            self.take_turns()
        self.ready.push(job)
        self.work.set()

    def enqueue(self, job: Job) -> None:
        """Queue `job` for its `run_at`: runnable now, or delayed until then."""
        if job.run_at > self._clock.now():
            self.delay(job)
        else:
            self.push(job)

    def take_turns(self) -> None:
        """Make groups take turns at the ready queue from now on (`GroupTurns`).

        Once, at the first job with a group; the jobs queued so far keep
        their queue (as the turns' `base`). Workers then take jobs through
        `take` (`plain` is off), which pops the turns.
        """
        if self.turns is None:
            self.turns = GroupTurns(self.ready, self._make_queue)
            self.ready = self.turns
            self.plain = False

    def delay(self, job: Job) -> None:
        """Hold `job` until its `run_at`."""
        if self.turns is None and job_group(job) is not None:
            self.take_turns()
        run_at = job.run_at
        heappush(self.delayed, (run_at, job.seq, job))
        if run_at < self._timer_at and self._running:
            self._arm(run_at)

    def remove(self, job: Job) -> None:
        """Take `job`'s stale entries out of the ready queue and the delayed heap."""
        self.ready.remove(job)
        if any(entry[2] is job for entry in self.delayed):
            self.delayed = [entry for entry in self.delayed if entry[2] is not job]
            heapify(self.delayed)

    # ── the admission chain ───────────────────────────────────────────
    def pause(self) -> bool:
        """Admit nothing until `resume`; False if already paused."""
        if self.paused:
            return False
        self.paused = True
        self.plain = False
        return True

    def resume(self) -> bool:
        """Admit again after `pause`; False if not paused."""
        if not self.paused:
            return False
        self.paused = False
        self._replain()
        self.work.set()
        return True

    def pause_queue(self, queue: str) -> bool:
        """Admit no job of `queue` until `resume_queue`; False if already paused."""
        if queue in self.paused_queues:
            return False
        self.paused_queues[queue] = []
        self.plain = False
        return True

    def resume_queue(self, queue: str) -> bool:
        """Admit `queue`'s jobs again, those held back first; False if not paused."""
        held = self.paused_queues.pop(queue, None)
        if held is None:
            return False
        push = self.ready.push
        for job in held:
            if not job.status.is_terminal:
                push(job)
        self._replain()
        self.work.set()
        return True

    def _replain(self) -> None:
        self.plain = (
            not self.paused
            and not self.paused_queues
            and self.limiter is None
            and self._starting is None
            and self.turns is None
        )

    def take(self) -> Job | None:
        """The best runnable job that may start now, or None. No await inside: atomic.

        Skips cancelled entries; drops a job the backend no longer holds
        (``starting``); parks or delays a job a limit holds back.
        """
        if self.paused:
            return None
        pop = self.ready.pop
        starting = self._starting
        limiter = self.limiter
        held = self.paused_queues
        while (job := pop()) is not None:
            if job.status.is_terminal:  # lazily deleted: cancelled while queued
                if limiter is not None:
                    limiter.skipped(job)
                continue
            if held and job.queue in held:
                if limiter is not None:
                    limiter.skipped(job)
                held[job.queue].append(job)  # its queue is paused: kept for its resume
                continue
            if starting is not None and not starting(job):
                if limiter is not None:
                    limiter.skipped(job)
                self._drop(job)  # no longer the backend's to run
                continue
            if limiter is not None:
                wait = limiter.admit(job)
                if wait:
                    if wait > 0:  # no rate token until `wait`: to the delayed heap
                        job.run_at = wait
                        self.enqueue(job)
                    continue  # parked by a concurrency limit: the next job may run
            return job
        return None

    # ── the delayed heap's timer ──────────────────────────────────────
    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = self._clock.call_at(when, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = math.inf
        delayed, push = self.delayed, self.ready.push
        now = self._clock.now()
        promoted = False
        while delayed and delayed[0][0] <= now:
            job = heappop(delayed)[2]
            if not job.status.is_terminal:
                push(job)
                promoted = True
        if promoted:
            self.work.set()
        if delayed and self._running:
            self._arm(delayed[0][0])

"""The feeder's claim policies: how many jobs to hold, and what to do with a
claimed job this process cannot build.

`SharedBackend`'s feeder claims in batches; `claim_target` sizes the next
one from how the last went. A claimed row whose job type this process has
but cannot build from the stored arguments (another version of the type, in
a rolling deploy) is handed back for another worker (`refuse`), and fails
once too many workers refused it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..store import SharedJobRow, SharedStore, build_refused_error

if TYPE_CHECKING:
    from ..kernel.port import KernelPort

#: The most jobs a process keeps claimed ahead of its workers, per worker.
MAX_PREFETCH_PER_WORKER = 64


def claim_target(target: int, base: int, full: bool, kernel: KernelPort) -> int:
    """How many jobs to hold (running + queued here) after a claim came back.

    A claim that filled its batch while workers sat idle with nothing queued
    here means the jobs are shorter than a claim's round trip: the workers
    ate the local backlog before the next batch arrived. Then the batch
    doubles (up to `MAX_PREFETCH_PER_WORKER` per worker), so that one
    transaction carries more jobs. Long jobs keep every worker busy, and a
    drained queue returns a short batch: the target falls back to `base`, so
    a process does not sit on jobs that idle processes could run.
    """
    if not full:
        return base
    if kernel.queued == 0 and kernel.running < kernel.num_workers:
        return min(2 * target, MAX_PREFETCH_PER_WORKER * kernel.num_workers)
    if kernel.running >= kernel.num_workers:
        return max(base, target // 2)
    return target


async def refuse(
    store: SharedStore,
    refused: list[tuple[SharedJobRow, str]],
    *,
    owner: str,
    refuser: str,
    bound: int,
    fail: Callable[[str, str], None],
    log: Any,
) -> bool:
    """Hand back jobs `owner` cannot build (`SharedStore.refuse`, as
    `refuser`), each with why: they wait for a worker with another version
    of their type. One that has been refused `bound` times fails, naming
    why (``fail(job_id, error)``). True if some were handed back (another
    claim may take them now); a store error is logged (their leases expire
    and the reaper queues them again)."""
    try:
        at_bound = set(
            await store.refuse(
                [(row.job_id, error) for row, error in refused],
                owner,
                refuser,
                bound,
            )
        )
    except Exception as exc:  # their leases expire and the reaper queues them again
        log.error(
            "could not hand back jobs it cannot build",
            job_ids=[row.job_id for row, _ in refused],
            error=str(exc),
        )
        return False
    for row, error in refused:
        if row.job_id in at_bound:
            log.error(
                "job failed: too many workers could not build it",
                job_id=row.job_id,
                type=row.type,
                max_build_refusals=bound,
            )
            fail(row.job_id, build_refused_error(row.type, row.build_refusals + 1, bound, error))
    return len(at_bound) < len(refused)

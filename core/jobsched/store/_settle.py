"""Trigger rules: how a shared store settles a job's dependencies (as the kernel does)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from .._status import JobStatus
from .._trigger_rules import ALL_SUCCESS, Upstreams, check_trigger_rule

_TERMINAL = frozenset(("completed", "failed", "timed_out", "cancelled"))


def settle_at_insert(
    rule: str, depends_on: Sequence[str], statuses: Mapping[str, str]
) -> tuple[list[str], int, str | None]:
    """A new job's dependencies settled by its trigger rule (`SharedStore.insert`).

    `statuses` gives each dependency's status now (``"pending"`` for one
    inserted earlier in the batch). Returns ``(waits_for, unmet, error)``:
    the dependencies still unfinished, how many it still waits for (0: due
    now, released by its rule), and the reason it is cancelled at once (None
    if it is not; when it is, `waits_for` is empty). The
    ended dependencies are settled in `depends_on` order, with `Upstreams`.
    An unknown `rule` is a `ValueError` naming it (`check_trigger_rule`).
    """
    if rule == ALL_SUCCESS:
        # Equivalent to the general case below, without building Upstreams.
        unmet = [d for d in depends_on if statuses.get(d) != "completed"]
        broken = [d for d in unmet if statuses.get(d) in _TERMINAL]
        if broken:
            return [], 0, f"upstream {broken[0]} {statuses[broken[0]]}"
        return unmet, len(unmet), None
    waits_for = [d for d in depends_on if statuses.get(d) not in _TERMINAL]
    upstreams = Upstreams(check_trigger_rule(rule), len(depends_on))
    for d in depends_on:
        status = statuses.get(d)
        if status not in _TERMINAL:
            continue
        run, reason = upstreams.settle(d, JobStatus(status))
        if run is False:
            return [], 0, reason
        if run:
            return waits_for, 0, None
    return waits_for, len(waits_for), None


def settle_dependent(
    rule: str, unmet: int, ended: Iterable[tuple[str, str]]
) -> tuple[bool | None, int, str]:
    """A waiting dependent after some of its upstreams ended (`SharedStore.finish`).

    `unmet` is how many upstreams it waited for (more than 0: a dependent at
    0 was released and is never settled again); `ended` is ``(upstream,
    status)`` for each of its upstreams that just reached a terminal status,
    in the order they did. Returns ``(True, 0, "")``: release it;
    ``(False, 0, reason)``: cancel it with `reason` (the upstreams it still
    waited for no longer matter, and it settles its own dependents as
    ``cancelled``); ``(None, unmet_left, "")``: it waits for the others.
    """
    upstreams = Upstreams(rule, unmet)
    for upstream, status in ended:
        run, reason = upstreams.settle(upstream, JobStatus(status))
        if run is not None:
            return run, 0, reason
    return None, upstreams.waiting, ""

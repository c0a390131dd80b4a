"""The dependency graph: which jobs wait for which, and what an ending releases.

The graph decides; it never runs or finishes a job itself. `wait` says
whether a new job may run, waits or is cancelled; `ended` and
`release_committed` return the dependents an ending releases (to queue) or
cancels (to finish), for the kernel to act on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from .._status import JobStatus
from .._trigger_rules import ALL_SUCCESS, Upstreams

if TYPE_CHECKING:
    from .._job import Job
    from .table import JobTable

COMPLETED = JobStatus.COMPLETED

#: What an ending decided for one dependent: ``(job, None)`` queue it now,
#: ``(job, reason)`` cancel it with that reason.
Settled = list[tuple["Job", "str | None"]]


class DependencyGraph:
    """Dependencies of the jobs of one `JobTable`.

    ``blocked``    job id -> ids of unmet dependencies
    ``waiters``    job id -> ids of jobs waiting on it (until it ends)
    ``upstreams``  job id -> the ids it was submitted to wait for (met or not)
    ``downstream`` job id -> ids of every job submitted to depend on it, in
                   submit order (kept while both are known: `dependents`)
    unreleased     ended jobs whose end the backend has not kept yet: their
                   dependents wait (durable before visible)

    The maps are public for reading: the kernel's hot path calls `ended`
    and `forget` only when one holds something.
    """

    __slots__ = (
        "_rule_of",
        "_rules",
        "_table",
        "blocked",
        "downstream",
        "unreleased",
        "upstreams",
        "waiters",
    )

    def __init__(self, table: JobTable) -> None:
        self._table = table
        self.blocked: dict[str, set[str]] = {}
        self.waiters: dict[str, list[str]] = {}
        # Unlike `waiters` (emptied as upstreams end, and without the
        # dependents an ended upstream released at submit), this keeps every
        # edge for `dependents`; dicts as ordered sets, so forgetting a job
        # unlinks it in O(1).
        self.downstream: dict[str, dict[str, None]] = {}
        self.upstreams: dict[str, tuple[str, ...]] = {}
        self._rule_of: dict[str, str] = {}  # job id -> a trigger rule other than all_success
        # Blocked job id -> its upstreams' outcomes, for a rule other than all_success.
        self._rules: dict[str, Upstreams] = {}
        self.unreleased: set[str] = set()

    # ── queries ───────────────────────────────────────────────────────
    def depends_on(self, job_id: str) -> tuple[str, ...]:
        """The ids of the jobs `job_id` was submitted to wait for (met or not)."""
        return self.upstreams.get(job_id, ())

    def trigger_rule(self, job_id: str) -> str:
        """The trigger rule `job_id` was submitted with (``"all_success"`` by default)."""
        return self._rule_of.get(job_id, ALL_SUCCESS)

    def dependents(self, job_id: str) -> tuple[str, ...]:
        """The ids of the jobs submitted to depend on `job_id` (waiting or not,
        ended or not), in submit order, as far as the table still knows
        them. `UnknownJobError` for an id the table does not know."""
        self._table.get(job_id)
        found = self.downstream.get(job_id)
        return tuple(found) if found else ()

    def waiting_on(self, job_id: str) -> frozenset[str]:
        """The ids of the dependencies the PENDING job `job_id` still waits for."""
        self._table.get(job_id)  # an unknown id is an error, not "waits for nothing"
        return frozenset(self.blocked.get(job_id, ()))

    # ── changes ───────────────────────────────────────────────────────
    def link(self, job_id: str, depends_on: Iterable[str], rule: str) -> None:
        """Record that `job_id` was submitted to wait for `depends_on`."""
        upstreams = self.upstreams[job_id] = tuple(sorted(set(depends_on)))
        if rule != ALL_SUCCESS:
            self._rule_of[job_id] = rule
        downstream = self.downstream
        for upstream in upstreams:
            found = downstream.get(upstream)
            if found is None:
                downstream[upstream] = {job_id: None}
            else:
                found[job_id] = None

    def wait(
        self, job_id: str, deps: set[str], upstreams: Upstreams | None
    ) -> tuple[bool, str | None]:
        """Whether the new job `job_id` waits for `deps` (all known):
        ``(False, None)`` it may run now, ``(True, None)`` it waits,
        ``(True, reason)`` it can never run (cancel it)."""
        jobs = self._table.jobs
        unreleased = self.unreleased
        if upstreams is not None:
            unmet = set()
            for d in sorted(deps):
                status = jobs[d].status
                # An upstream whose end the backend has not kept yet still waits.
                if not status.is_terminal or d in unreleased:
                    unmet.add(d)
                    continue
                run, reason = upstreams.settle(d, status)
                if run is False:
                    return True, reason
                if run:
                    return False, None
            self.hold(job_id, unmet, upstreams)
            return True, None
        for d in sorted(deps):
            status = jobs[d].status
            if status.is_terminal and status is not COMPLETED:
                return True, f"upstream {d} {status.value}"
        unmet = {d for d in deps if jobs[d].status is not COMPLETED or d in unreleased}
        if unmet:
            self.hold(job_id, unmet, None)
            return True, None
        return False, None

    def hold(self, job_id: str, unmet: set[str], upstreams: Upstreams | None) -> None:
        """`job_id` waits for `unmet` (under `upstreams` for a rule other than all_success)."""
        self.blocked[job_id] = unmet
        if upstreams is not None:
            self._rules[job_id] = upstreams
        waiters = self.waiters
        for d in unmet:
            found = waiters.get(d)
            if found is None:
                waiters[d] = [job_id]
            else:
                found.append(job_id)

    def ended(self, job_id: str, status: JobStatus, *, held: bool) -> Settled | None:
        """`job_id` ended with `status`: what that does to its dependents.

        `held`: the backend keeps ends before they are visible; the
        dependents wait for `release_committed`.
        """
        if self.blocked:
            self.blocked.pop(job_id, None)
        if self._rules:
            self._rules.pop(job_id, None)
        if held:
            self.unreleased.add(job_id)
            return None
        dependents = self.waiters.pop(job_id, None) if self.waiters else None
        return self._settle(job_id, status, dependents) if dependents else None

    def release_committed(self, finished: Mapping[str, JobStatus]) -> Settled:
        """The backend kept these ends: what they do to their dependents."""
        settled: Settled = []
        for job_id, status in finished.items():
            self.unreleased.discard(job_id)
            dependents = self.waiters.pop(job_id, None)
            if dependents:
                settled += self._settle(job_id, status, dependents)
        return settled

    def forget(self, job_id: str) -> None:
        """Forget `job_id`'s edges both ways (it left the table)."""
        downstream = self.downstream
        downstream.pop(job_id, None)
        self._rule_of.pop(job_id, None)
        for upstream in self.upstreams.pop(job_id, ()):
            found = downstream.get(upstream)
            if found is not None:
                found.pop(job_id, None)
                if not found:
                    del downstream[upstream]

    def _settle(self, job_id: str, status: JobStatus, dependents: list[str]) -> Settled:
        settled: Settled = []
        jobs = self._table.jobs
        blocked = self.blocked
        for dep_id in dependents:
            dependent = jobs.get(dep_id)
            if dependent is None or dependent.status.is_terminal:
                continue
            upstreams = self._rules.get(dep_id) if self._rules else None
            if upstreams is not None:  # kept until it finishes
                unmet = blocked.get(dep_id)
                if unmet is None:
                    continue  # released early: how its other upstreams end no longer matters
                run, reason = upstreams.settle(job_id, status)
                if run is None:
                    unmet.discard(job_id)
                    continue
                del blocked[dep_id]
                settled.append((dependent, None if run else reason))
            elif status is COMPLETED:
                unmet = blocked.get(dep_id)
                if unmet is not None:
                    unmet.discard(job_id)
                    if not unmet:
                        del blocked[dep_id]
                        settled.append((dependent, None))
            else:  # cascade: the upstream did not complete
                settled.append((dependent, f"upstream {job_id} {status.value}"))
        return settled

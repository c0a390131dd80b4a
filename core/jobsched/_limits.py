"""Concurrency limits per executor, job type and queue, and token-bucket rate limits.

Enforced in the dispatch path (the last link of the kernel's admission chain,
`kernel/queues.py`), with no polling:

* A job whose executor or job type is at its concurrency limit is *parked* on
  that limit's queue and the worker moves on to the next job, so one job that
  must wait never blocks the others behind it. When an attempt of that
  executor or type ends, parked jobs go back to the ready queue (with their
  original sort key: order is kept) as long as the limit has room.
* A job without a rate-limit token gets a reservation for its token time and
  goes to the delayed heap until then (the delayed heap's one timer wakes
  it). Reservations make a burst cost one heap round-trip per job, not one
  per job per token.

A scheduler without limits never creates a `Limiter`, and its dispatch path
is the plain one: limits cost nothing unless configured.
"""

from __future__ import annotations

import contextlib
import difflib
import math
import re
from collections import deque
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ._job import FunctionJob, Job, callable_name, job_group
from ._status import ConcurrencyModel

if TYPE_CHECKING:
    from ._clock import Clock

_RATE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*/\s*(\d+(?:\.\d*)?)?\s*([a-z]+)\s*$")
_UNITS = {
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "m": 60.0,
    "min": 60.0,
    "minute": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
}


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


@attrs.frozen
class Rate:
    """A token bucket: `per_second` tokens a second, at most `burst` at once.

    ``Rate.parse("10/s")``, ``"600/min"``, ``"5/2h"``, or a number (per second).
    """

    per_second: float
    burst: int = 1

    def __attrs_post_init__(self) -> None:
        if (
            isinstance(self.per_second, bool)
            or not isinstance(self.per_second, (int, float))
            or not self.per_second > 0
            or not math.isfinite(self.per_second)
        ):
            raise ValueError(f"rate must be a positive number per second, got {self.per_second!r}")
        _positive_int("burst", self.burst)

    @classmethod
    def parse(cls, spec: Rate | str | float | Mapping[str, Any]) -> Rate:
        """A rate from ``"10/s"``, ``"600/min"``, a number per second, or ``{rate=, burst=}``."""
        if isinstance(spec, Rate):
            return spec
        if isinstance(spec, Mapping):
            unknown = set(spec) - {"rate", "burst"}
            if unknown or "rate" not in spec:
                raise ValueError(
                    f"rate {dict(spec)!r}: expected keys 'rate' (required) and 'burst'"
                )
            base = cls.parse(spec["rate"])
            return cls(base.per_second, spec.get("burst", base.burst))
        if isinstance(spec, str):
            match = _RATE.match(spec.lower())
            unit = match and _UNITS.get(match.group(3).rstrip("s") or "s")
            if match is None or unit is None:
                raise ValueError(
                    f"rate {spec!r}: expected COUNT/UNIT such as '10/s', '600/min' or '5/2h'"
                )
            assert match is not None
            per = float(match.group(2) or 1) * unit
            if not per > 0:
                raise ValueError(f"rate {spec!r}: the period must be longer than 0")
            return cls(float(match.group(1)) / per)
        if isinstance(spec, (int, float)) and not isinstance(spec, bool):
            return cls(float(spec))
        raise ValueError(f"rate must be like '10/s' or a number per second, got {spec!r}")


def _counts(kind: str, value: Mapping[str, Any] | None) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"limits.{kind} must be a mapping of names to limits, got {value!r}")
    return {str(k): _positive_int(f"limits.{kind}[{k!r}]", v) for k, v in value.items()}


def _executor_counts(value: Mapping[str, Any] | None) -> dict[str, int]:
    return _counts("executors", value)


def _job_type_counts(value: Mapping[str, Any] | None) -> dict[str, int]:
    return _counts("job_types", value)


def _queue_counts(value: Mapping[str, Any] | None) -> dict[str, int]:
    return _counts("queues", value)


def _group_count(value: Any) -> int | None:
    return None if value is None else _positive_int("limits.group", value)


def _rates(value: Mapping[str, Any] | None) -> dict[str, Rate]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"limits.rates must be a mapping of job types to rates, got {value!r}")
    rates = {}
    for k, v in value.items():
        try:
            rates[str(k)] = Rate.parse(v)
        except ValueError as exc:
            raise ValueError(f"limits.rates[{k!r}]: {exc}") from None
    return rates


@attrs.frozen(kw_only=True)
class Limits:
    """What a scheduler limits; pass as ``JobScheduler(limits=...)`` (or a dict of these keys).

    `executors` maps an executor name to its most attempts at once
    (``{"process": 2}``); `job_types` maps a job type to its most attempts at
    once (``{"csv-export": 1}``); `rates` maps a job type to a `Rate` or
    anything `Rate.parse` takes (``{"email": "10/s"}``). A job's type is its
    registered job-type name, else its class's ``job_type`` attribute, else -
    for a function job - the function's qualified name, else its class name
    (see `job_type_of`). `queues` maps a queue to its most attempts at once
    (``{"emails": 5}``; on a shared store, across the cluster). `group` is
    the most attempts at once of each distinct job group (``group=2``: two
    per tenant; jobs without a group are not limited by it). Bad values
    raise `ValueError` naming the key.
    """

    executors: dict[str, int] = attrs.field(factory=dict, converter=_executor_counts)
    job_types: dict[str, int] = attrs.field(factory=dict, converter=_job_type_counts)
    rates: dict[str, Rate] = attrs.field(factory=dict, converter=_rates)
    queues: dict[str, int] = attrs.field(factory=dict, converter=_queue_counts)
    group: int | None = attrs.field(default=None, converter=_group_count)

    @classmethod
    def coerce(cls, value: Limits | Mapping[str, Any]) -> Limits:
        """Limits from a `Limits` or a mapping (keys executors, job_types, rates, queues, group)."""
        if isinstance(value, Limits):
            return value
        if not isinstance(value, Mapping):
            raise TypeError(f"limits must be a Limits or a mapping, got {value!r}")
        unknown = set(value) - {"executors", "job_types", "rates", "queues", "group"}
        if unknown:
            raise ValueError(
                f"limits: unknown keys {sorted(unknown)} "
                "(expected executors, job_types, rates, queues, group)"
            )
        return cls(
            executors=value.get("executors"),
            job_types=value.get("job_types"),
            rates=value.get("rates"),
            queues=value.get("queues"),
            group=value.get("group"),
        )

    def __bool__(self) -> bool:
        return bool(self.executors or self.job_types or self.rates or self.queues or self.group)

    def as_data(self) -> dict[str, Any] | None:
        """These limits as the JSON a shared store keeps (None for no limits)."""
        if not self:
            return None
        data: dict[str, Any] = {
            "executors": dict(sorted(self.executors.items())),
            "job_types": dict(sorted(self.job_types.items())),
            "rates": {
                name: {"per_second": rate.per_second, "burst": rate.burst}
                for name, rate in sorted(self.rates.items())
            },
        }
        # Each only when set: limits stored before queues or groups existed
        # compare equal.
        if self.queues:
            data["queues"] = dict(sorted(self.queues.items()))
        if self.group is not None:
            data["group"] = self.group
        return data

    @staticmethod
    def unknown_name(
        kind: str, name: str, known: Collection[str], *, typos_only: bool = False
    ) -> str | None:
        """Why `name` is not a registered name for a `kind` limit; None when it is.

        `kind` is ``"executors"``, ``"job_types"`` or ``"rates"`` (rates key on job
        types). With `typos_only`, an unknown name is a problem only when it is
        close to a known one (the name space is open: see `Limits.check_names`).
        """
        if name in known:
            return None
        cutoff = 0.8 if typos_only else 0.5
        close = difflib.get_close_matches(name, sorted(known), n=2, cutoff=cutoff)
        if typos_only and not close:
            return None
        what = "executor" if kind == "executors" else "job type"
        message = f"unknown {what} {name!r}"
        if close:
            message += f"; did you mean {' or '.join(repr(c) for c in close)}?"
        message += f" (registered: {', '.join(sorted(known)) or 'none'})"
        if typos_only:
            message += (
                "; a name this close to a registered job type is taken for a typo "
                "(rename the job class's job_type or the function if it is meant)"
            )
        return message

    def check_names(self, *, executors: Collection[str], job_types: Collection[str]) -> None:
        """Refuse a limit that can never apply: raise `ValueError` naming it.

        An executor limit must name one of `executors` (the registered ones).
        A job-type limit or rate may also name a job class's ``job_type`` or a
        function, which no registry lists, so it is refused only when it is
        not one of `job_types` but close to one: a typo (``"emial"``).
        """
        for kind, names in (
            ("executors", self.executors),
            ("job_types", self.job_types),
            ("rates", self.rates),
        ):
            for name in names:
                if kind == "executors":
                    problem = self.unknown_name(kind, name, executors)
                else:
                    problem = self.unknown_name(kind, name, job_types, typos_only=True)
                if problem is not None:
                    raise ValueError(f"limits.{kind}[{name!r}]: {problem}")


def job_type_of(job: Job, registered: Mapping[type, str] | None = None) -> str:
    """The name job-type limits and rates know `job` by.

    Its registered job-type name; else its class's ``job_type`` string
    attribute; for a function job, the function's qualified name; else the
    class name.
    """
    cls = type(job)
    if registered:
        name = registered.get(cls)
        if name is not None:
            return name
    declared = getattr(cls, "job_type", None)
    if isinstance(declared, str):
        return declared
    if cls is FunctionJob:
        return callable_name(job.fn)  # type: ignore[attr-defined]
    return cls.__name__


class _Counter:
    """One concurrency limit: attempts running, and the jobs parked waiting for room."""

    __slots__ = ("inflight", "label", "limit", "name", "parked", "running")

    def __init__(self, name: str, limit: int, label: str) -> None:
        self.name = name
        self.label = label  # its key in Limiter.held_back
        self.limit = limit
        self.running = 0
        self.inflight = 0  # un-parked jobs on their way back through the ready queue
        self.parked: deque[Job] = deque()


class _Bucket:
    """A token bucket as GCRA: one "theoretical arrival time" instead of a token count.

    Taking a token at `now` (inlined in `Limiter.admit`): ``tat = max(tat,
    now)``; the token is free now if ``tat - tolerance <= now``, else it is
    reserved for that time; either way ``tat += interval``.
    """

    __slots__ = ("interval", "tat", "tolerance")

    def __init__(self, rate: Rate) -> None:
        self.interval = 1.0 / rate.per_second
        self.tolerance = (rate.burst - 1) * self.interval
        self.tat = -math.inf


class Limiter:
    """The runtime side of `Limits`, owned by the scheduler's loop thread."""

    def __init__(
        self,
        limits: Limits,
        *,
        clock: Clock,
        requeue: Callable[[Job], None],
        registered_types: Mapping[type, str] | None = None,
        queue_slots: Mapping[str, int | None] | None = None,
    ) -> None:
        self.limits = limits
        self._clock = clock
        self._now = clock.now
        self._requeue = requeue
        self._registered = dict(registered_types or {})
        # Keyed by the executor name *and* the ConcurrencyModel member when one
        # exists: a str-Enum member hashes differently from its value.
        self._executors: dict[Any, _Counter] = {}
        for name, limit in limits.executors.items():
            counter = _Counter(f"executor {name!r}", limit, f"executor:{name}")
            self._executors[name] = counter
            with contextlib.suppress(ValueError):
                self._executors[ConcurrencyModel(name)] = counter
        # A linear scan comparing by identity first: hashing a str-Enum member
        # runs Python code, and there are only a few executors.
        self._executor_scan = tuple(self._executors.items())
        self._types = {
            n: _Counter(f"job type {n!r}", v, f"job_type:{n}") for n, v in limits.job_types.items()
        }
        self._buckets = {name: _Bucket(rate) for name, rate in limits.rates.items()}
        # A queue's limit: the cluster's (`Limits.queues`) or this process's
        # concurrency for it (`queue_slots`), whichever is lower.
        caps = dict(limits.queues)
        for name, slots in (queue_slots or {}).items():
            if slots is not None:
                caps[name] = min(caps.get(name, slots), slots)
        self._queues = {n: _Counter(f"queue {n!r}", v, f"queue:{n}") for n, v in caps.items()}
        self._need_type = bool(self._types or self._buckets)
        # One counter per group with jobs running or parked, made when its
        # first job comes and dropped when its last one ends.
        self._group_limit = limits.group
        self._groups: dict[str, _Counter] = {}
        self._reserved: set[Job] = set()  # jobs holding a rate-limit reservation
        # Counted attempts: their executor's, job type's, queue's and group's limits.
        self._held: dict[
            Job, tuple[_Counter | None, _Counter | None, _Counter | None, _Counter | None]
        ] = {}
        # job class, or a function job's function -> its type's (concurrency, rate) limits
        self._per_type: dict[Any, tuple[_Counter | None, _Bucket | None]] = {}
        self._origin: dict[Job, _Counter] = {}  # un-parked job -> the limit that released it
        #: Times a limit held a job back (parked it, or delayed it for a rate
        #: token), by limit: ``"executor:NAME"``, ``"job_type:NAME"``,
        #: ``"rate:NAME"``, ``"group:NAME"``. Only counted off the common path
        #: (when holding back).
        self.held_back: dict[str, int] = {}

    @property
    def parked(self) -> int:
        """Jobs waiting for room under a concurrency limit."""
        counters = {
            id(c): c
            for c in (
                *self._executors.values(),
                *self._types.values(),
                *self._queues.values(),
                *self._groups.values(),
            )
        }
        return sum(len(c.parked) for c in counters.values())

    def running(
        self,
        *,
        executor: str | None = None,
        job_type: str | None = None,
        queue: str | None = None,
        group: str | None = None,
    ) -> int:
        """Attempts running under one executor's, job type's, queue's or group's limit."""
        if group is not None:
            counter = self._groups.get(group)
        elif queue is not None:
            counter = self._queues.get(queue)
        elif executor:
            counter = self._executors.get(executor)
        else:
            counter = self._types.get(job_type or "")
        return counter.running if counter is not None else 0

    def admit(self, job: Job) -> float:
        """Decide about a job popped from the ready queue.

        0.0: run it now (it is counted). -1.0: parked, the limiter keeps it.
        A time: no rate token until then (a reservation is made); the
        scheduler puts the job on the delayed heap until that time.
        """
        # The per-job path when limits are on: one call, no helpers on the
        # common path (benchmarks/limits.py measures it).
        origin = None
        if self._origin:
            origin = self._origin.pop(job, None)
            if origin is not None:
                origin.inflight -= 1
        exe = None
        if self._executor_scan:
            model = job.model
            for key, counter in self._executor_scan:
                if key is model or key == model:
                    exe = counter
                    break
            if exe is not None and exe.running >= exe.limit:
                exe.parked.append(job)
                self._held_back(exe.label)
                if origin is not None and origin is not exe:
                    self._kick(origin)  # it did not use the room it was woken for
                return -1.0
        lane = None
        if self._queues:
            lane = self._queues.get(job.queue)
            if lane is not None and lane.running >= lane.limit:
                lane.parked.append(job)
                self._held_back(lane.label)
                if origin is not None and origin is not lane:
                    self._kick(origin)
                return -1.0
        grp = None
        if self._group_limit is not None:
            name = job_group(job)
            if name is not None:
                grp = self._groups.get(name)
                if grp is None:
                    grp = self._groups[name] = _Counter(
                        f"group {name!r}", self._group_limit, f"group:{name}"
                    )
                elif grp.running >= grp.limit:
                    grp.parked.append(job)
                    self._held_back(grp.label)
                    if origin is not None and origin is not grp:
                        self._kick(origin)
                    return -1.0
        kind = None
        if self._need_type:
            cls = type(job)
            key = job.fn if cls is FunctionJob else cls  # type: ignore[attr-defined]
            try:
                kind, bucket = self._per_type[key]
            except (KeyError, TypeError):
                kind, bucket = self._lookup_type(job, key)
            if kind is not None and kind.running >= kind.limit:
                kind.parked.append(job)
                self._held_back(kind.label)
                if origin is not None and origin is not kind:
                    self._kick(origin)
                return -1.0
            if bucket is not None:
                if self._reserved and job in self._reserved:
                    self._reserved.discard(job)
                else:
                    # GCRA, inlined: take a token now or reserve the next one.
                    now = self._now()
                    tat = bucket.tat
                    if tat < now:
                        tat = now
                    bucket.tat = tat + bucket.interval
                    at = tat - bucket.tolerance
                    if at > now + 1e-9:
                        self._reserved.add(job)
                        self._held_back(f"rate:{job_type_of(job, self._registered)}")
                        if origin is not None:
                            self._kick(origin)
                        return at
            if kind is not None:
                kind.running += 1
        if exe is not None:
            exe.running += 1
        if lane is not None:
            lane.running += 1
        if grp is not None:
            grp.running += 1
        if exe is not None or kind is not None or lane is not None or grp is not None:
            self._held[job] = (exe, kind, lane, grp)
        return 0.0

    def _held_back(self, label: str) -> None:
        self.held_back[label] = self.held_back.get(label, 0) + 1

    def _lookup_type(self, job: Job, key: Any) -> tuple[_Counter | None, _Bucket | None]:
        name = job_type_of(job, self._registered)
        found = (self._types.get(name), self._buckets.get(name))
        with contextlib.suppress(TypeError):  # an unhashable callable is looked up each time
            self._per_type[key] = found
        return found

    def skipped(self, job: Job) -> None:
        """A job popped from the ready queue was already finished (cancelled while queued)."""
        origin = self._origin.pop(job, None)
        if origin is not None:
            origin.inflight -= 1
            self._kick(origin)
        self._reserved.discard(job)

    def release(self, job: Job) -> None:
        """An attempt that `admit` counted has ended."""
        held = self._held.pop(job, None)
        if held is None:
            return
        exe, kind, lane, grp = held
        if exe is not None:
            exe.running -= 1
            if exe.parked:
                self._kick(exe)
        if lane is not None:
            lane.running -= 1
            if lane.parked:
                self._kick(lane)
        if kind is not None:
            kind.running -= 1
            if kind.parked:
                self._kick(kind)
        if grp is not None:
            grp.running -= 1
            if grp.parked:
                self._kick(grp)
            else:
                self._forget_group(grp)

    def _forget_group(self, counter: _Counter) -> None:
        """Drop an idle group's counter: groups come and go (one per tenant)."""
        if not (counter.running or counter.inflight or counter.parked):
            name = counter.label.removeprefix("group:")
            if self._groups.get(name) is counter:
                del self._groups[name]

    def _kick(self, counter: _Counter) -> None:
        """Send parked jobs back to the ready queue while the limit has room for them."""
        parked = counter.parked
        while parked and counter.running + counter.inflight < counter.limit:
            job = parked.popleft()
            if job.status.is_terminal:
                self._reserved.discard(job)
                continue  # cancelled while parked
            counter.inflight += 1
            self._origin[job] = counter
            self._requeue(job)
        if not parked:
            self._forget_group(counter)

"""Job options as users spell them, and the bounds on the numbers they give.

One place for both the Python API and the job file: ``priority="low"``,
``timeout=False`` and a retry policy's name mean the same wherever they are
written, and a number past a bound is refused with the bound named.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal, TypeVar

from ._status import JobPriority

T = TypeVar("T")

#: The most retries a retry policy may ask for (``max_retries``).
MAX_RETRIES = 1000
#: The longest wait, in seconds, for ``delay=`` and retry delays: one year.
MAX_DELAY = 31_536_000.0
#: The most workers a scheduler may run (``num_workers``).
MAX_WORKERS = 1024
#: The longest ``key`` or ``unique_key``, in characters: every store indexes
#: it, and a PostgreSQL index entry holds at most about 2,700 bytes (a
#: character takes up to 4 in UTF-8).
MAX_KEY_LENGTH = 512
#: The queue a job goes to when it names none, and the one a worker serves
#: when it is given none (``jobsched worker`` without ``--queue``).
DEFAULT_QUEUE = "default"
#: The longest queue name, in characters: every store indexes it.
MAX_QUEUE_LENGTH = 128
#: The longest job ``group`` (a tenant, a customer), in characters: the
#: shared stores index it with the claim order.
MAX_GROUP_LENGTH = 200
#: How deeply a stored job's arguments may nest lists and tables: every
#: store (and `json.loads` when it is read back) can hold that.
MAX_NESTING = 100


class _NotGiven(enum.Enum):
    NOT_GIVEN = "NOT_GIVEN"

    def __repr__(self) -> str:
        return "NOT_GIVEN"


#: The default of an option whose None and False are values of their own
#: (``timeout=False``: no timeout): "not given, keep the job's own".
NOT_GIVEN: Final = _NotGiven.NOT_GIVEN
#: The type of `NOT_GIVEN`, for signatures.
NotGiven = Literal[_NotGiven.NOT_GIVEN]


def describe_value(value: Any) -> str:
    """A value as an error message shows it: its kind and a short text (``string '5'``)."""
    kind = {bool: "boolean", int: "integer", float: "float", str: "string", list: "array"}
    name = "table" if isinstance(value, dict) else kind.get(type(value), type(value).__name__)
    text = json.dumps(value, default=repr) if not isinstance(value, str) else repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{name} {text}"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def to_priority(value: Any) -> JobPriority:
    """``"low"``/``"medium"``/``"high"``/``"critical"`` (any case), 0-3 or a `JobPriority`."""
    if isinstance(value, JobPriority):
        return value
    if isinstance(value, str):
        member = JobPriority.__members__.get(value.upper())
        if member is not None:
            return member
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            return JobPriority(value)
        except ValueError:
            pass
    names = ", ".join(m.name.lower() for m in JobPriority)
    raise ValueError(f"priority must be one of {names} (or 0-3), got {describe_value(value)}")


def priority_name(priority: JobPriority | int) -> str:
    """How data spells a priority: its lower-case name (``"high"``)."""
    return JobPriority(priority).name.lower()


def to_timeout(value: Any) -> float | None:
    """Seconds one attempt may run, as given; None or False mean no timeout."""
    if value is None or value is False:
        return None
    if not _is_number(value) or not value > 0:  # `not >` also refuses NaN
        raise ValueError(
            f"timeout must be a positive number of seconds, got {describe_value(value)} "
            "(None or False: no timeout)"
        )
    return value  # type: ignore[no-any-return]


def to_result_ttl(value: Any) -> float | None:
    """Seconds a completed job's result is kept, as given; None keeps it for good."""
    if value is None:
        return None
    if not _is_number(value) or not (value >= 0 and math.isfinite(value)):
        raise ValueError(
            f"result_ttl must be a number of seconds >= 0, got {describe_value(value)} "
            "(None: keep the result)"
        )
    return float(value)


def check_retention(value: Any) -> float | None:
    """Seconds finished jobs are kept before a reaper purges them; None: for good."""
    if value is None:
        return None
    if not _is_number(value) or not (value > 0 and math.isfinite(value)):
        raise ValueError(
            f"retention must be a positive number of seconds, got {describe_value(value)} "
            "(None: keep finished jobs)"
        )
    return float(value)


def to_keep_result(value: Any) -> bool:
    """Whether a completed job's result is stored at all (True or False only)."""
    if not isinstance(value, bool):
        raise ValueError(f"keep_result must be true or false, got {describe_value(value)}")
    return value


def to_name(value: Any) -> str:
    """A job's name given to submit: a non-empty string."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"name must be a non-empty string, got {value!r}")
    return value


def check_queue(value: Any, what: str = "queue") -> str:
    """A queue name: a non-empty string of at most `MAX_QUEUE_LENGTH`
    characters without surrounding spaces, that every store can hold."""
    if not isinstance(value, str) or not value or value.strip() != value:
        raise ValueError(
            f"{what} must be a non-empty name without surrounding spaces, "
            f"got {describe_value(value)}"
        )
    if len(value) > MAX_QUEUE_LENGTH:
        raise ValueError(
            f"{what} must be at most {MAX_QUEUE_LENGTH} characters (MAX_QUEUE_LENGTH), "
            f"got {len(value)}: {value[:40]!r}..."
        )
    problem = text_problem(value)
    if problem is not None:
        raise ValueError(f"{what} {value!r} {problem}")
    return value


def to_queue_slots(value: Any) -> dict[str, int | None]:
    """The queues a scheduler or worker serves, as ``{name: concurrency}``.

    None: the ``"default"`` queue alone. A list of names serves each with no
    concurrency of its own (the scheduler's workers are shared by all); a
    mapping gives a queue its concurrency in this process (an integer from 1
    to `MAX_WORKERS`, or None for none of its own).
    """
    if value is None:
        return {DEFAULT_QUEUE: None}
    if isinstance(value, str):
        raise TypeError(
            f"queues takes a list of queue names or a mapping of names to concurrency, "
            f"got the string {value!r}: write [{value!r}]"
        )
    items = value.items() if isinstance(value, Mapping) else ((name, None) for name in value)
    slots: dict[str, int | None] = {}
    for name, limit in items:
        check_queue(name, "queues: a queue name")
        if limit is not None and (
            not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_WORKERS
        ):
            raise ValueError(
                f"queues[{name!r}]: a queue's concurrency must be an integer from 1 to "
                f"{MAX_WORKERS} (MAX_WORKERS) or None, got {describe_value(limit)}"
            )
        if name in slots:
            raise ValueError(f"queues: queue {name!r} is given twice")
        slots[name] = limit
    if not slots:
        raise ValueError("queues must name at least one queue")
    return slots


def check_max_retries(value: Any, what: str = "max_retries") -> int:
    """An integer from 0 to `MAX_RETRIES`."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{what} must be an integer, got {describe_value(value)}")
    if not 0 <= value <= MAX_RETRIES:
        raise ValueError(f"{what} must be >= 0 and <= {MAX_RETRIES} (MAX_RETRIES), got {value!r}")
    return value


def check_delay(value: Any, what: str = "delay") -> float:
    """A finite number of seconds from 0 to `MAX_DELAY` (one year)."""
    if not _is_number(value):
        raise ValueError(f"{what} must be a number of seconds, got {describe_value(value)}")
    if not 0 <= value <= MAX_DELAY:  # also refuses NaN
        raise ValueError(
            f"{what} must be >= 0 and <= {MAX_DELAY:.0f} seconds (MAX_DELAY, one year), "
            f"got {value!r}"
        )
    return float(value)


def check_num_workers(value: Any) -> int:
    """An integer from 1 to `MAX_WORKERS`."""
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_WORKERS:
        raise ValueError(
            f"num_workers must be an integer from 1 to {MAX_WORKERS} (MAX_WORKERS), got {value!r}"
        )
    return value


def text_problem(text: str) -> str | None:
    """Why `text` cannot be kept as text by every store (PostgreSQL refuses
    both), or None: a NUL character or a lone surrogate."""
    if "\x00" in text:
        return "holds a NUL character (\\x00)"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"holds a lone surrogate ({text[exc.start]!r}), which is not Unicode text"
    return None


def check_key(value: Any, what: str = "key") -> str:
    """A `key` or `unique_key`: a non-empty string of at most `MAX_KEY_LENGTH`
    characters that every store can hold (`text_problem`)."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string, got {describe_value(value)}")
    if len(value) > MAX_KEY_LENGTH:
        raise ValueError(
            f"{what} must be at most {MAX_KEY_LENGTH} characters (MAX_KEY_LENGTH), "
            f"got {len(value)}: {value[:40]!r}..."
        )
    problem = text_problem(value)
    if problem is not None:
        raise ValueError(f"{what} {value!r} {problem}")
    return value


def check_group(value: Any) -> str | None:
    """A job's `group` (None: none): a non-empty string of at most
    `MAX_GROUP_LENGTH` characters that every store can hold (`text_problem`)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_GROUP_LENGTH:
        shown = describe_value(value)
        if isinstance(value, str) and value:
            shown = f"{len(value)} characters: {value[:40]!r}..."
        raise ValueError(
            f"group must be a non-empty string of at most {MAX_GROUP_LENGTH} characters "
            f"(MAX_GROUP_LENGTH) or None, got {shown}"
        )
    problem = text_problem(value)
    if problem is not None:
        raise ValueError(f"group {value!r} {problem}")
    return value


def check_job_id(value: Any) -> str:
    """A job id as given to a lookup: a string (`TypeError` naming it
    otherwise) that every store can hold (`ValueError` otherwise)."""
    if not isinstance(value, str):
        raise TypeError(f"a job id is a string, got {describe_value(value)}")
    problem = text_problem(value)
    if problem is not None:
        raise ValueError(f"job id {value!r} {problem}")
    return value


def id_list(values: Iterable[T], what: str) -> list[T]:
    """Job ids given as a collection (`depends_on`, `wait_many`) as a list; a
    single string is a `TypeError`, since iterating it gives its characters."""
    if isinstance(values, str):
        raise TypeError(
            f"{what} takes a collection of job ids, got the string {values!r}: write [{values!r}]"
        )
    return list(values)


def id_batch(values: Iterable[Any], what: str) -> list[str]:
    """The job ids of a bulk action (`retry_many`, ...): a collection of ids
    (`id_list`), each checked (`check_job_id`), an id given twice kept once,
    in the order given."""
    return list(dict.fromkeys(check_job_id(v) for v in id_list(values, what)))


def is_retry_spec(value: Any) -> bool:
    """Whether `retry` is written as data (a policy name or a table) rather than a policy."""
    return isinstance(value, str | Mapping)


RETRY_SPELLINGS = (
    'a retry policy (RetryPolicy(...)), a registered policy name such as "none", '
    '"fixed" or "exponential", or a table like {"policy": "fixed", "seconds": 2}'
)


def check_retry_policy(value: Any) -> Any:
    """A retry policy object as given, or a policy written as data (resolved at submit).

    The scheduler resolves a name or a table with its own plugins
    (`jobsched.build_job`'s rules), so a policy a plugin adds works too.
    """
    if is_retry_spec(value):
        return value
    max_retries = getattr(value, "max_retries", None)
    if max_retries is None or not callable(getattr(value, "delay", None)):
        raise TypeError(f"retry must be {RETRY_SPELLINGS}, got {value!r}")
    check_max_retries(max_retries, f"retry policy {type(value).__name__}: max_retries")
    return value

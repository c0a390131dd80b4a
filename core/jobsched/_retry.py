"""Retry policies: how many times a failed job runs again, and after how long."""

from __future__ import annotations

import random
from typing import Any, Protocol, runtime_checkable

import attrs

from ._options import check_delay, check_max_retries


@runtime_checkable
class RetryPolicyLike(Protocol):
    """What the kernel needs of a retry policy (see the ``exponential`` plugin)."""

    @property
    def max_retries(self) -> int:
        """Retries after the first attempt; 0 means the job runs once."""

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Seconds to wait after the 1-based `attempt` failed."""


def retry_count(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """attrs validator: an integer from 0 to `MAX_RETRIES`."""
    check_max_retries(value, attribute.name)


def retry_delay(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """attrs validator: seconds from 0 to `MAX_DELAY` (one year), finite."""
    check_delay(value, attribute.name)


@attrs.frozen
class RetryPolicy:
    """Capped exponential backoff with optional full jitter (the reference's policy).

    ``cap = min(max_delay, base_delay * 2 ** (attempt - 1))`` and the delay is
    ``uniform(0, cap)`` with jitter, else ``cap``. `attempt` is the 1-based
    number of the attempt that just failed. Full jitter spreads the retries of
    many jobs that failed together so they don't come back as a herd.
    """

    max_retries: int = attrs.field(default=3, validator=retry_count)
    base_delay: float = attrs.field(default=1.0, validator=retry_delay)
    max_delay: float = attrs.field(default=60.0, validator=retry_delay)
    jitter: bool = True

    def delay(self, attempt: int, rng: random.Random) -> float:
        cap = min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))
        return rng.uniform(0, cap) if self.jitter else cap

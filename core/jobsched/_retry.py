"""Retry policies: how many times a failed job runs again, and after how long."""

from __future__ import annotations

import random
from typing import Any, Protocol, runtime_checkable

import attrs


@runtime_checkable
class RetryPolicyLike(Protocol):
    """What the kernel needs of a retry policy (see the ``exponential`` plugin)."""

    @property
    def max_retries(self) -> int:
        """Retries after the first attempt; 0 means the job runs once."""

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Seconds to wait after the 1-based `attempt` failed."""


def _non_negative(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must be >= 0, got {value!r}")


@attrs.frozen
class RetryPolicy:
    """Capped exponential backoff with optional full jitter (the reference's policy).

    ``cap = min(max_delay, base_delay * 2 ** (attempt - 1))`` and the delay is
    ``uniform(0, cap)`` with jitter, else ``cap``. `attempt` is the 1-based
    number of the attempt that just failed. Full jitter spreads the retries of
    many jobs that failed together so they don't come back as a herd.
    """

    max_retries: int = attrs.field(default=3, validator=_non_negative)
    base_delay: float = attrs.field(default=1.0, validator=_non_negative)
    max_delay: float = attrs.field(default=60.0, validator=_non_negative)
    jitter: bool = True

    def delay(self, attempt: int, rng: random.Random) -> float:
        cap = min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))
        return rng.uniform(0, cap) if self.jitter else cap

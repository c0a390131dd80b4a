"""Job types for tests/test_process_payload.py, importable by worker processes."""

from __future__ import annotations

from typing import Any

import attrs

from jobsched import CpuBoundJob


class Fields(CpuBoundJob):
    """Slots of its own (one name-mangled, one left unset) and what the kernel set."""

    __slots__ = ("__secret", "factor", "unset")

    def __init__(self, name: str, factor: int, **options: Any) -> None:
        super().__init__(name, **options)
        self.factor = factor
        self.__secret = factor * 10

    def run_sync(self) -> dict[str, Any]:
        return {
            "factor": self.factor,
            "secret": self.__secret,
            "unset": hasattr(self, "unset"),
            "attempts": self.attempts,
            "job_id": self.job_id,
            "priority": self.priority,
            "status": self.status,
            "retry": self.retry,
            "timeout": self.timeout,
        }


class WithDict(CpuBoundJob):
    """No __slots__: its own attributes live in a __dict__."""

    def __init__(self, name: str, payload: list[int]) -> None:
        super().__init__(name)
        self.payload = payload

    def run_sync(self) -> list[int]:
        return [x * 2 for x in self.payload]


class Reduced(CpuBoundJob):
    """Pickles itself its own way: sent as it is."""

    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        super().__init__("reduced")
        self.value = value

    def __reduce__(self) -> tuple[Any, ...]:
        return (Reduced, (self.value + 1,))

    def run_sync(self) -> int:
        return self.value


@attrs.define
class AttrsJob(CpuBoundJob):
    """An attrs job type: attrs pickles it."""

    n: int

    def run_sync(self) -> int:
        return self.n * 3

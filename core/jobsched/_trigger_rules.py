"""When a dependent runs: its trigger rule over how its upstream jobs ended.

``all_success`` (the default) runs a dependent once every upstream
completed, and cancels it as soon as one did not. The others:

============ =============================================================
all_done     once every upstream finished, however it ended
one_success  as soon as one upstream completed; cancelled if none did
one_failed   as soon as one upstream failed or timed out; cancelled if none did
none_failed  once every upstream finished and none failed or timed out
             (a cancelled upstream is not a failure); cancelled at the
             first failure
============ =============================================================

A dependent released early (``one_success``, ``one_failed``) does not wait
for its other upstreams, and how they end no longer matters to it.
"""

from __future__ import annotations

import difflib
from typing import Any

from ._status import JobStatus

ALL_SUCCESS = "all_success"
TRIGGER_RULES = (ALL_SUCCESS, "all_done", "one_success", "one_failed", "none_failed")

_FAILED = (JobStatus.FAILED, JobStatus.TIMED_OUT)


def check_trigger_rule(value: Any) -> str:
    """`value` if it names a trigger rule, else a `ValueError` with the closest names."""
    if isinstance(value, str) and value in TRIGGER_RULES:
        return value
    close = difflib.get_close_matches(str(value), TRIGGER_RULES, n=2)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise ValueError(
        f"unknown trigger_rule {value!r}{hint} (trigger rules: {', '.join(TRIGGER_RULES)})"
    )


class Upstreams:
    """How a dependent's upstreams have ended so far, under its trigger rule."""

    __slots__ = ("rule", "waiting")

    def __init__(self, rule: str, count: int) -> None:
        self.rule = rule
        self.waiting = count  # upstreams not finished yet

    def settle(self, upstream: str, status: JobStatus) -> tuple[bool | None, str]:
        """One upstream ended with `status`: ``(True, "")`` run the dependent now,
        ``(False, reason)`` cancel it, ``(None, "")`` wait for more."""
        self.waiting -= 1
        rule = self.rule
        if rule == "one_success":
            if status is JobStatus.COMPLETED:
                return True, ""
            if not self.waiting:
                return False, "trigger rule 'one_success': no upstream completed"
        elif rule == "one_failed":
            if status in _FAILED:
                return True, ""
            if not self.waiting:
                return False, "trigger rule 'one_failed': no upstream failed"
        elif rule == "none_failed" and status in _FAILED:
            return False, f"trigger rule 'none_failed': upstream {upstream} {status.value}"
        elif rule == ALL_SUCCESS and status is not JobStatus.COMPLETED:
            return False, f"upstream {upstream} {status.value}"
        if not self.waiting and rule in (ALL_SUCCESS, "all_done", "none_failed"):
            return True, ""
        return None, ""

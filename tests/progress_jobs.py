"""Module-level job functions for the progress tests: picklable, so the process
and subprocess executors can run them."""

from __future__ import annotations

import jobsched


def steps(n: int) -> int:
    """Reports 1..n of n, with a message, then returns n."""
    for i in range(1, n + 1):
        jobsched.progress(i, n, f"step {i}")
    return n

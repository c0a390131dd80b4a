"""The three ways a scheduler keeps its jobs, each a `jobsched.kernel.Backend`.

- `LocalBackend` (`local.py`): in memory; the kernel's own queues, no store work.
- `JournalBackend` (`journal.py`): a durable store one process owns (SQLite):
  every state change is journaled in batches, and ``start()`` restores.
- `SharedBackend` (`shared.py`): a store several processes share (PostgreSQL):
  jobs are submitted to the store and claimed back with a lease. Its
  recurring schedules are `schedules.py`'s, which `jobsched.Client` uses too;
  its outcomes are written by `outcomes.py` (row by row if the store refuses
  a batch, kept while it does not answer).

`JobScheduler` picks one, once, when it is composed (docs/architecture.md).
"""

from __future__ import annotations

from .journal import JournalBackend
from .local import LocalBackend
from .shared import SharedBackend

__all__ = ["JournalBackend", "LocalBackend", "SharedBackend"]

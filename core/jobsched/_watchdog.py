"""A worker process's loop watchdog: a thread that sees its event loop blocked.

A job that never gives the event loop back (``async def spin(): while True:
pass``, a blocking call in an async job) stops everything the loop does:
no lease is renewed, no timeout fires, no signal is handled. The loop beats
(a timer callback every `tick` seconds); a daemon thread counts the time it
watched without a beat. Past the limit it logs the job(s) running then with
the loop thread's stack, and ends the process (`EXIT_LOOP_BLOCKED`): its
leases expire and other workers take its jobs, so the store's bound on
expired leases decides how often a poison job may run.

The watchdog also enforces a shutdown: once stopping was asked
(`shutdown_asked`), a loop that is blocked when the grace is over, or when
a second signal asks for an immediate stop, ends the process the same way
(the loop, if it ran, would have handed the jobs back itself).

Only time the thread was awake to see counts, so a stopped process
(SIGSTOP) or a starved machine does not look like a blocked loop.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import structlog

#: The exit status of a worker its watchdog ended.
EXIT_LOOP_BLOCKED = 4

#: The most stack frames logged (the innermost ones: the job's).
STACK_FRAMES = 25

#: Seconds the watchdog's last log line may take before the process ends regardless.
LAST_WORDS = 2.0

logger = structlog.get_logger("jobsched.watchdog")


class LoopWatchdog:
    """Ends the process when `loop` (running on the calling thread) is blocked
    longer than `limit` seconds, or past a shutdown's grace.

    `culprits()` names the job(s) running at the time (called on the
    watchdog's thread, while the loop is blocked); `end` ends the process.
    Start it on the loop's thread; `close` stops it.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        limit: float,
        culprits: Callable[[], list[str]],
        log: Any = None,
        end: Callable[[int], object] = os._exit,
    ) -> None:
        if not limit > 0:
            raise ValueError(f"the block limit must be more than 0 seconds, got {limit!r}")
        self.limit = limit
        self.tick = min(0.25, limit / 4)
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._culprits = culprits
        self._log = log if log is not None else logger
        self._end = end
        self._beats = 0
        self._beat_handle: asyncio.TimerHandle | None = None
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="jobsched-watchdog", daemon=True)
        # Set from the loop's thread by a signal handler, read by the watchdog's.
        self._stop_by: float | None = None  # monotonic deadline of a shutdown's grace
        self._stop_now = False

    def start(self) -> None:
        self._beat()
        self._thread.start()

    def close(self) -> None:
        """Stop watching (the worker has stopped)."""
        self._closing.set()
        if self._beat_handle is not None:
            self._beat_handle.cancel()
        self._thread.join(timeout=1.0)

    def shutdown_asked(self, grace: float, *, at_once: bool = False) -> None:
        """A shutdown began (`at_once`: a second signal asked to skip the grace).

        Safe in a signal handler, while the loop is blocked.
        """
        if self._stop_by is None:
            self._stop_by = time.monotonic() + grace
        if at_once:
            self._stop_now = True

    def _beat(self) -> None:
        self._beats += 1
        self._beat_handle = self._loop.call_later(self.tick, self._beat)

    def _watch(self) -> None:
        seen, blocked = self._beats, 0.0
        last = time.monotonic()
        while not self._closing.wait(self.tick):
            now = time.monotonic()
            # Counted only while this thread was there to see it.
            awake, last = min(now - last, 2 * self.tick), now
            if self._beats != seen:
                seen, blocked = self._beats, 0.0
                continue
            blocked += awake
            if blocked > self.limit:
                self._trip(
                    f"event loop blocked for {blocked:.1f}s (--block-limit {self.limit:g}s): "
                    "ending the worker; its jobs run again when their leases expire",
                    blocked,
                )
                return
            stop_by = self._stop_by
            stopped = stop_by is not None and (self._stop_now or now >= stop_by)
            if stopped and blocked >= 2 * self.tick:
                why = "a second signal" if self._stop_now else "the shutdown's grace is over"
                self._trip(
                    f"event loop blocked and {why}: ending the worker without handing its "
                    "jobs back; they run again when their leases expire",
                    blocked,
                )
                return

    def _trip(self, message: str, blocked: float) -> None:
        # Logging could wait on a stream the blocked loop holds: the process
        # ends a little later whatever happens.
        last_words = threading.Timer(LAST_WORDS, self._end, (EXIT_LOOP_BLOCKED,))
        last_words.daemon = True
        last_words.start()
        try:
            self._log.critical(
                message,
                jobs=", ".join(self._culprits()) or "none",
                blocked_for=round(blocked, 3),
                stack=self._loop_stack(),
            )
            sys.stderr.flush()
        finally:
            self._end(EXIT_LOOP_BLOCKED)

    def _loop_stack(self) -> str:
        frame = sys._current_frames().get(self._loop_thread)
        if frame is None:
            return "(the loop's thread has ended)"
        return "".join(traceback.format_stack(frame, limit=STACK_FRAMES))

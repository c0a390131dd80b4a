"""`Portal`: an event loop on a thread of its own, called from any other thread.

As anyio's ``BlockingPortal``: synchronous code hands a coroutine function
and its arguments to the portal and blocks until the loop answers, with the
coroutine's result or its exception; any number of threads may call at once.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")


class Portal:
    """A running event loop on a daemon thread named `name` until `stop`."""

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def in_loop_thread(self) -> bool:
        """Whether the caller is the loop's own thread (which must not block on it)."""
        return threading.current_thread() is self._thread

    def call(
        self,
        function: Callable[P, Coroutine[Any, Any, T]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``await function(*args, **kwargs)`` on the loop; its answer here."""
        return asyncio.run_coroutine_threadsafe(function(*args, **kwargs), self._loop).result()

    def stop(self) -> None:
        """Stop the loop, join its thread and close the loop (calls made meanwhile fail)."""
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

"""The thread pool of plain-`def` fn tools (ToolService runs each such call here)."""

from __future__ import annotations

import asyncio
import os
from typing import Any


class FnThreads:
    """The threads that run plain-`def` fn tools: a queue in, `call_soon_threadsafe` out.

    The loop's default executor does the same with more machinery (a concurrent Future chained
    to an asyncio one, a work item, a lock per submit), which costs a trivial call about 30 µs.
    Threads start on demand, up to `max_workers`, and are daemons: a function still running
    when the process exits (one that outlived its timeout) does not hold the exit up.
    """

    def __init__(self, max_workers: int) -> None:
        self.max_workers = max_workers
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # a forked child starts with no threads

    def _reset(self) -> None:
        import queue
        import threading

        self._queue: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads = 0

    def run(self, loop: asyncio.AbstractEventLoop, fn: Any, *args: Any) -> asyncio.Future[Any]:
        future = loop.create_future()
        self._queue.put((loop, future, fn, args))
        if not self._idle.acquire(blocking=False):
            with self._lock:
                if self._threads < self.max_workers:
                    import threading

                    self._threads += 1
                    threading.Thread(target=self._work, name=f"toolrun-fn-{self._threads}", daemon=True).start()
        return future

    def _work(self) -> None:
        while True:
            loop, future, fn, args = self._queue.get()
            if future.cancelled():  # its caller gave up (timeout) while it waited: it never runs
                del loop, future, fn, args
                self._idle.release()
                continue
            try:
                result, error = fn(*args), None
            except BaseException as exc:  # handed to the caller, whatever it is
                result, error = None, exc
            try:
                loop.call_soon_threadsafe(settle, future, result, error)
            except RuntimeError:  # the loop is closed: nobody is waiting any more
                pass
            del loop, future, fn, args, result, error
            self._idle.release()


def settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # the caller gave up (timeout, cancelled)
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


FN_THREADS = FnThreads(min(32, (os.cpu_count() or 1) + 4))

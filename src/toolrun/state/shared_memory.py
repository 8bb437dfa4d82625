"""The shared-memory engine: one concurrency pool (kinds.Slots) for every worker of `serve --workers N`.

Made by the supervisor before it forks, so each worker inherits it. The pool is a POSIX semaphore
(in shared memory: taking or giving a slot is an atomic operation, a system call only when workers
contend) that starts at the cap, and a second one for the places in the queue; so the cap holds
exactly across the workers, and a call waits only when the server as a whole is full, however
unevenly the kernel spreads connections over the workers. Each worker also counts what it holds in
its own cell of a shared page: a worker that dies holding slots (killed) cannot give them back, so
its replacement (the same cell) gives them back to the pool when it starts. (A worker killed in the
instant between the semaphore and its cell costs the pool one slot until the server restarts: never one
slot more than the cap.)

A call that finds the pool full waits (up to `queue_timeout`) while fewer than the cap wait in the
whole server, else it is refused at once. A worker wakes its own waiters when it frees a slot; a
slot freed by another worker is seen at the next look of the worker's poller, every `POLL` seconds (one
task per worker, only while calls wait there).

Cost, measured on the shared 2-core VM (CPython 3.11, load average about 10): a take and a give of
`MemorySlots` 0.35-0.46 us, of `SharedSlots` 0.75-1.0 us (an `fcntl` record lock around a sum of the
cells, tried first, took 2-6 us), in a call that costs about 1 ms of CPU.
"""

from __future__ import annotations

import mmap

from .memory import MemorySlots

POLL = 0.01  # seconds between looks at the shared pool while a call waits for a slot


class SharedSlots(MemorySlots):
    """One pool for the worker processes of one server (see the module): make it before the fork."""

    shared = True
    poll = POLL

    def __init__(self, cap: int, workers: int) -> None:
        import multiprocessing

        super().__init__(cap)
        self.workers = workers
        self.index = 0
        context = multiprocessing.get_context("fork")  # an unnamed semaphore, inherited by the forked workers
        self._slots = context.Semaphore(cap)
        self._seats = context.Semaphore(cap)  # places in the queue
        self._map = mmap.mmap(-1, 16 * workers)  # shared and anonymous: a running and a waiting cell per worker
        cells = memoryview(self._map).cast("q")
        self._running = cells[:workers]
        self._waiting = cells[workers:]

    def attach(self, index: int) -> None:
        """In worker `index` (0-based), at its start: what a predecessor (dead) still held goes back to the pool."""
        self.index = index
        self.running = self.waiting = 0
        for cells, semaphore in ((self._running, self._slots), (self._waiting, self._seats)):
            for _ in range(max(0, cells[index])):
                semaphore.release()
            cells[index] = 0

    def total(self) -> tuple[int, int]:
        """(running, waiting) in the whole server, as counted by each worker."""
        return sum(self._running), sum(self._waiting)

    def free(self) -> bool:
        return bool(self._slots.get_value() > 0)

    def take(self) -> bool:
        if not self._slots.acquire(False):
            return False
        self._running[self.index] += 1  # this worker's own cell: only it writes there
        self.running += 1
        return True

    def give(self) -> None:
        self._running[self.index] -= 1
        self._slots.release()
        super().give()

    def queue(self) -> bool:
        if not self._seats.acquire(False):
            return False
        self._waiting[self.index] += 1
        self.waiting += 1
        return True

    def unqueue(self) -> None:
        self.waiting -= 1
        self._waiting[self.index] -= 1
        self._seats.release()

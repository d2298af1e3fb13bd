"""The bounded worker pool: analyses run in worker processes, off the event loop.

A pebble ProcessPool gives each task a time limit: a task past it is stopped with its worker
process, which the pool replaces, so a pathological input costs one time limit and nothing
else. At most `workers + queue` analyses are admitted at once; one more is refused with
`Busy` (the HTTP API answers 503 with Retry-After). Workers are recycled after
`max_tasks` tasks, so memory stays what a fresh worker needs.
"""
from __future__ import annotations

import asyncio
import math
import multiprocessing
import time

from . import analysis


class Busy(Exception):
    def __init__(self, retry_after: int):
        super().__init__(f"busy: {retry_after} s")
        self.retry_after = retry_after


class TimedOut(Exception):
    pass


class WorkerFailed(Exception):
    pass


class AnalysisPool:
    def __init__(self, workers: int, queue: int, time_limit: float, max_tasks: int = 1000):
        self.workers, self.queue, self.time_limit, self.max_tasks = workers, queue, time_limit, max_tasks
        self.pending = 0
        self._pool = None
        self._recent = 0.5  # seconds an analysis takes, smoothed (for Retry-After)

    @property
    def capacity(self) -> int:
        return self.workers + self.queue

    @property
    def running(self) -> bool:
        return self._pool is not None and self._pool.active

    async def start(self) -> None:
        from pebble import ProcessPool
        # spawn: a fresh interpreter per worker, nothing inherited from the server's threads
        self._pool = ProcessPool(max_workers=self.workers, max_tasks=self.max_tasks, initializer=analysis.warm_up,
                                 context=multiprocessing.get_context("spawn"))
        # one round trip per worker, so the first requests do not pay for start-up
        await asyncio.gather(*(asyncio.wrap_future(self._pool.schedule(analysis.ping, timeout=120))
                               for _ in range(self.workers)))

    def retry_after(self) -> int:
        return max(1, math.ceil(self._recent * (self.pending + 1) / self.workers))

    async def run(self, job: analysis.Job) -> analysis.Result:
        if self._pool is None:
            raise WorkerFailed("the worker pool is not running")
        if self.pending >= self.capacity:
            raise Busy(self.retry_after())
        self.pending += 1
        started = time.monotonic()
        try:
            future = self._pool.schedule(analysis.run, args=(job,), timeout=self.time_limit)
            try:
                return await asyncio.wrap_future(future)  # cancelling this cancels (stops) the task
            except TimeoutError:
                raise TimedOut() from None
            except Exception as exc:  # pebble.ProcessExpired: the worker died (killed, out of memory)
                raise WorkerFailed(f"{type(exc).__name__}: {exc}") from None
        finally:
            self.pending -= 1
            self._recent = 0.8 * self._recent + 0.2 * (time.monotonic() - started)

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.stop()
            await asyncio.get_running_loop().run_in_executor(None, self._pool.join, 5)
            self._pool = None

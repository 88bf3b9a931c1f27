"""Batching of concurrent predict requests into one signature call.

Requests queue up; the batcher takes the first, then those already waiting (they queued
while the previous batch ran) and, with `delay_s` > 0, those that arrive within `delay_s`, up
to `max_rows` rows, concatenates those that go together
(the same model version and signature, inputs of the same trailing shapes and dtypes), calls
the signature once in a worker thread and splits the outputs by rows. A batch whose outputs
do not have one row per input row (a model whose batch axis is not its examples' axis) is run
again request by request, so batching never changes an answer.

Example:

    >>> import asyncio, numpy as np
    >>> def run(version, signature, arrays):
    ...     return {"outputs": arrays["x"] * 2}
    >>> async def main():
    ...     batcher = Batcher(run, max_rows=8, delay_s=0.01)
    ...     answers = await asyncio.gather(*[
    ...         batcher.submit(None, "serving_default", {"x": np.array([[float(i)]])})
    ...         for i in range(3)])
    ...     await batcher.close()
    ...     return [float(a["outputs"][0, 0]) for a in answers], batcher.batches
    >>> asyncio.run(main())
    ([0.0, 2.0, 4.0], 1)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import time
from collections.abc import Callable

import numpy as np

__all__ = ["Batcher", "rows_of"]


def rows_of(arrays: dict) -> int:
    """The examples in a request: the leading dimension of its first input."""
    return int(len(next(iter(arrays.values()))))


@dataclasses.dataclass
class _Job:
    version: object
    signature: str
    arrays: dict
    rows: int
    future: asyncio.Future

    def key(self) -> tuple:
        return (id(self.version), self.signature,
                tuple((k, v.shape[1:], v.dtype.str) for k, v in self.arrays.items()))


class Batcher:
    """Runs `run(version, signature, arrays)` on batches of concurrent requests.

    Args:
        run: the call of one signature on {input: array}; returns {output: array}.
        max_rows: the most rows in one call.
        delay_s: how long the first request of a batch waits for others to arrive (0: it
            takes those already waiting, and waits for none: no latency is added when the
            server is idle, and under load a batch gathers while the previous one runs).
        executor: where `run` executes (default: one worker thread).
    """

    def __init__(self, run: Callable, max_rows: int = 64, delay_s: float = 0.0,
                 executor: concurrent.futures.Executor | None = None):
        if max_rows < 1:
            raise ValueError(f"max_rows={max_rows}: a batch holds at least one row")
        if delay_s < 0:
            raise ValueError(f"delay_s={delay_s}: give a delay of 0 seconds or more")
        self.run = run
        self.max_rows = max_rows
        self.delay_s = delay_s
        self.executor = executor or concurrent.futures.ThreadPoolExecutor(1, "batcher")
        self.batches = 0
        self.batched_rows = 0
        self._queue: asyncio.Queue | None = None
        self._task = None
        self._held: list[_Job] = []

    async def submit(self, version, signature: str, arrays: dict) -> dict:
        """The outputs for one request's rows, once its batch has run."""
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._task = asyncio.get_running_loop().create_task(self._work())
        future = asyncio.get_running_loop().create_future()
        await self._queue.put(_Job(version, signature, arrays, rows_of(arrays), future))
        return await future

    async def close(self) -> None:
        """Stops the worker (requests still queued get an error)."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _next(self, timeout: float | None) -> _Job | None:
        if self._held:
            return self._held.pop(0)
        if timeout is None:
            return await self._queue.get()
        try:
            return await asyncio.wait_for(self._queue.get(), max(timeout, 0))
        except asyncio.TimeoutError:
            return None

    async def _gather(self) -> list[_Job]:
        first = await self._next(None)
        jobs, rows, deadline = [first], first.rows, time.monotonic() + self.delay_s
        skipped = []
        while rows < self.max_rows:
            remaining = deadline - time.monotonic()
            if self._held:
                job = self._held.pop(0)
            elif not self._queue.empty():
                job = self._queue.get_nowait()
            else:
                job = await self._next(remaining) if remaining > 0 else None
            if job is None:
                break
            if job.key() != first.key() or rows + job.rows > self.max_rows:
                skipped.append(job)
                if rows + job.rows > self.max_rows:
                    break
                continue
            jobs.append(job)
            rows += job.rows
        self._held = skipped + self._held
        return jobs

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            jobs = await self._gather()
            try:
                results = await loop.run_in_executor(self.executor, self._run_batch, jobs)
            except Exception as error:  # each request gets the error (a 4xx/5xx answer)
                results = [error] * len(jobs)
            for job, result in zip(jobs, results):
                if job.future.done():
                    continue
                if isinstance(result, Exception):
                    job.future.set_exception(result)
                else:
                    job.future.set_result(result)

    def _run_batch(self, jobs: list[_Job]) -> list:
        self.batches += 1
        self.batched_rows += sum(job.rows for job in jobs)
        first = jobs[0]
        if len(jobs) == 1:
            return [self._run_one(first)]
        arrays = {k: np.concatenate([job.arrays[k] for job in jobs]) for k in first.arrays}
        total = sum(job.rows for job in jobs)
        try:
            outputs = self.run(first.version, first.signature, arrays)
        except Exception:  # one request's values: each request answers for its own
            return [self._run_one(job) for job in jobs]
        if any(np.ndim(v) == 0 or len(v) != total for v in outputs.values()):
            return [self._run_one(job) for job in jobs]  # not one output row per input row
        results, start = [], 0
        for job in jobs:
            results.append({k: v[start:start + job.rows] for k, v in outputs.items()})
            start += job.rows
        return results

    def _run_one(self, job: _Job):
        try:
            return self.run(job.version, job.signature, job.arrays)
        except Exception as error:
            return error

"""One worker thread for a widget's session work, with per-key latest-wins coalescing.

The session is not thread safe, so every job runs on the one worker, in order of
submission. Jobs carry a key ("full", a region id, "preview", …):

* at most one job per key is queued: a newer submission for a key whose job has
  not started replaces it in place (the replaced future is cancelled), so a
  request superseded before it starts never runs;
* each submission bumps the key's generation; a job learns its generation and
  asks ``is_current`` before publishing: a result overtaken by a newer
  submission while it ran (or by ``bump``) is not current, and is dropped, or
  (a region's fit during a live drag, widget/regionjobs.py) published marked
  with how many generations it trails ``generation(key)``.

Keys submitted with ``coalesce=False`` (saves, exports) are never replaced.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Scheduler", "WidgetClosedError"]

Future = concurrent.futures.Future


class WidgetClosedError(RuntimeError):
    """Work or an edit reached a widget (its scheduler) after ``close()``."""


@dataclass
class _Job:
    key: str
    fn: Callable[[int], Any]
    generation: int
    future: Future[Any] = field(default_factory=Future)


class Scheduler:
    """A single worker thread running keyed jobs, latest wins per key."""

    def __init__(self, name: str = "livessb-worker",
                 on_error: Callable[[str, BaseException], None] | None = None) -> None:
        self._on_error = on_error
        self._cond = threading.Condition()
        self._queue: deque[_Job] = deque()
        self._queued: dict[str, _Job] = {}  # key -> its queued (not started) coalescing job
        self._generation: dict[str, int] = {}
        self._running: _Job | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    # -- generations -------------------------------------------------------------
    def generation(self, key: str) -> int:
        """The key's latest generation (0: never submitted)."""
        with self._cond:
            return self._generation.get(key, 0)

    def bump(self, key: str) -> int:
        """A new generation without a job: in-flight and queued work for the key is stale."""
        with self._cond:
            gen = self._generation.get(key, 0) + 1
            self._generation[key] = gen
            job = self._queued.pop(key, None)
            if job is not None:
                self._queue.remove(job)
                job.future.cancel()
            return gen

    def is_current(self, key: str, generation: int) -> bool:
        with self._cond:
            return not self._closed and self._generation.get(key, 0) == generation

    # -- submission --------------------------------------------------------------
    def submit(self, key: str, fn: Callable[[int], Any], coalesce: bool = True) -> Future[Any]:
        """Queue ``fn(generation)`` under ``key``; returns its future.

        With ``coalesce`` a job of the same key that has not started is replaced
        (its future cancelled) and the new one takes its place in the queue.
        """
        with self._cond:
            if self._closed:
                raise WidgetClosedError("the widget is closed: its worker takes no more work")
            gen = self._generation.get(key, 0) + 1
            self._generation[key] = gen
            job = _Job(key, fn, gen)
            old = self._queued.pop(key, None) if coalesce else None
            if old is not None:
                self._queue[self._queue.index(old)] = job
                old.future.cancel()
            else:
                self._queue.append(job)
            if coalesce:
                self._queued[key] = job
            self._cond.notify_all()
            return job.future

    def busy(self, key: str) -> bool:
        """Work for the key is queued or running."""
        with self._cond:
            running = self._running is not None and self._running.key == key
            return running or any(j.key == key for j in self._queue)

    def wait(self, timeout: float | None = None) -> None:
        """Block until the queue is empty and nothing runs; TimeoutError after ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._queue or self._running is not None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError("widget work still running")
                self._cond.wait(left)

    # -- lifetime ----------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    def shutdown(self, wait: bool = True, timeout: float | None = None) -> None:
        """Cancel queued work, stop the worker (after the running job when ``wait``)."""
        with self._cond:
            self._closed = True
            for job in self._queue:
                job.future.cancel()
            self._queue.clear()
            self._queued.clear()
            self._cond.notify_all()
        if wait and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                job = self._queue.popleft()
                if self._queued.get(job.key) is job:
                    del self._queued[job.key]
                self._running = job
            try:
                if job.future.set_running_or_notify_cancel():
                    try:
                        job.future.set_result(job.fn(job.generation))
                    except BaseException as exc:  # reported, and kept on the future
                        if self._on_error is not None:
                            self._on_error(job.key, exc)
                        job.future.set_exception(exc)
            finally:
                with self._cond:
                    self._running = None
                    self._cond.notify_all()

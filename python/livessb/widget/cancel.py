"""Cancel for the widget's long jobs: the full-field fit, a refinement, a map
(docs/widget-protocol.md, the ``cancel`` message; SPEC §3 ``aria-label="cancel"``).

Each such job is submitted through :class:`CancelJobs`. While it is queued or inside
its session call, the ``cancellable`` trait names it (the browser enables its cancel
button). :meth:`CancelJobs.cancel` sets the job's flag; the progress callback the job
hands its session call checks the flag on every report (each search batch, Newton
iteration, map tile) and raises :class:`~livessb.fit.progress.Cancelled`, which the
session lets propagate with its state as before the call. The job then publishes
nothing: ``full_fit``, ``map_overlays`` and the regions stay, ``status`` is what that
kept state says (as before the job), and the ``cancelled`` trait names the job.

Once the session call has returned, the result is the session's: the job can no
longer be cancelled (what remains, a frame of the fit, is quick). Region fits are not
cancellable (a newer edit supersedes them): they never see a flag, so a cancel of
another job leaves them running.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..fit.progress import Cancelled, ProgressCallback
from .progress import IDLE

if TYPE_CHECKING:
    from .widget import SSBWidget

__all__ = ["CANCELLED_TEXT", "CancelJobs"]

CANCELLED_TEXT = "{name} cancelled: the earlier results are kept"


@dataclass(eq=False)
class _Job:
    name: str  # "fit" | "refine" | "map": the `cancellable` / `cancelled` traits
    key: str  # the worker key and the widget's `_busy` entry
    stop: threading.Event = field(default_factory=threading.Event)
    state: str = "queued"  # queued | started | past (its session call returned)


class CancelJobs:
    """One widget's cancellable jobs, in the order the worker runs them."""

    def __init__(self, widget: SSBWidget) -> None:
        self._w = widget
        self._lock = threading.Lock()
        self._jobs: list[_Job] = []  # submitted and not finished
        self._current: _Job | None = None  # the one the worker runs (one worker)

    # -- submission (caller's thread) ---------------------------------------------
    def submit(self, name: str, key: str, run: Callable[[], None]) -> None:
        """Queue ``run()`` on the worker under ``key`` as the cancellable job ``name``;
        ``run`` wraps its session call in :meth:`checked`."""
        job = _Job(name, key)
        with self._lock:
            # A queued job of the same key is replaced in its place in the worker's
            # queue (latest wins): take that place here too.
            at = next((i for i, j in enumerate(self._jobs)
                       if j.key == key and j.state == "queued"), len(self._jobs))
            self._jobs.insert(at, job)
        try:
            future = self._w._submit(key, lambda _g: self._run(job, run))
        except BaseException:
            self._forget(job)
            raise
        future.add_done_callback(lambda _f: self._forget(job))  # also when replaced
        self._w.cancelled = ""
        self._publish()

    def cancel(self) -> str | None:
        """Stop the running cancellable job (or, while none runs, the next one queued):
        its name, or None when there is none. It stops at its next progress report."""
        with self._lock:
            job = self._target()
            if job is not None:
                job.stop.set()
        if job is None:
            return None
        self._publish()
        return job.name

    def message(self, _content: dict[str, Any]) -> None:
        """The browser's ``{type: "cancel"}`` (the cancel button, Esc)."""
        self.cancel()

    # -- on the worker --------------------------------------------------------------
    @contextlib.contextmanager
    def checked(self, report: ProgressCallback) -> Iterator[ProgressCallback]:
        """``report`` behind a check of the running job's flag, for its session call;
        past the block the job is no longer cancellable."""
        job = self._current

        def progress(stage: str, done: int, total: int) -> None:
            if job is not None and job.stop.is_set():
                raise Cancelled(f"{job.name} cancelled")
            report(stage, done, total)

        try:
            if job is not None and job.stop.is_set():  # cancelled while queued
                raise Cancelled(f"{job.name} cancelled")
            yield progress
        finally:
            if job is not None:
                job.state = "past"
                self._publish()

    def _run(self, job: _Job, run: Callable[[], None]) -> None:
        job.state = "started"
        self._current = job
        try:
            run()
        except Cancelled:
            self._cancelled(job)
        finally:
            self._current = None

    def _cancelled(self, job: _Job) -> None:
        """Nothing published: the state as before the job, and a line that says so."""
        w = self._w
        if w._closed:
            return
        with w._lock, w.hold_sync():
            w.progress = dict(IDLE)
            w._busy.discard(job.key)
            w.cancelled = job.name
            w.message = CANCELLED_TEXT.format(name=job.name)
            w._update_status()

    # -- the `cancellable` trait ------------------------------------------------------
    def _target(self) -> _Job | None:
        return next((j for j in self._jobs if j.state != "past"), None)

    def _forget(self, job: _Job) -> None:
        with self._lock:
            if job in self._jobs:
                self._jobs.remove(job)
        self._publish()

    def _publish(self) -> None:
        """``cancellable``: the job a cancel would stop ("" when none, or while that one
        is already stopping)."""
        with self._lock:
            job = self._target()
            name = "" if job is None or job.stop.is_set() else job.name
        if not self._w._closed and self._w.cancellable != name:
            self._w.cancellable = name

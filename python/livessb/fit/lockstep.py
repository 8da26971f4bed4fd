"""Many window fits in lockstep, so they share the host's waits for the device.

A window fit (a map tile) waits for the device once per engine call: a search batch, a
Newton round, the errors. Run one after another, 64 tiles wait ~1200 times, and the
host's own work (proposals, trust-region steps) never overlaps the device's. Here each
fit runs in its own thread, ONE AT A TIME (the engine and its caches are not shared
between concurrent callers): a fit runs until it needs a download, queues it and hands
over to the next; when every live fit has queued one, a single transfer brings them all
back (``xp.start_download_many``) and each fit resumes in turn. The device works
through the queued launches of all fits while the host prepares the next one's.

With ``groups=2`` (a GPU map) the fits in flight take their turns in two alternating
groups: a group's download is queued asynchronously (page-locked memory, an event) and
the host runs the other group's turns while the device reaches it, so neither waits
for the whole width at a round's end (H200, 8x8 map: the rounds' waits were ~0.3-0.45 s
of its 1.4-1.5 s).

Each fit computes exactly what it would alone (same engine calls, same inputs), so the
results equal a sequential run's bit for bit. Timings measured inside a fit include the
turns of the others.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ..xp import PendingDownload, downloads_through, start_download_many

T = TypeVar("T")

SITE = "lockstep"


class Abandoned(BaseException):
    """Raised inside a waiting fit when its round is abandoned (another fit failed or
    the caller stopped): the fit unwinds, releasing what it holds."""


@dataclass
class _Fit(Generic[T]):
    index: int
    run: Callable[[], T]
    state: str = "new"  # new → running ⇄ waiting → done
    queued: Any = None  # the array awaiting the round's download
    host: Any = None  # its downloaded value
    result: Any = None
    error: BaseException | None = None
    thread: threading.Thread | None = None
    go: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))


class Lockstep(Generic[T]):
    """Runs ``fits`` (callables) at most ``width`` at a time in lockstep; ``on_done``
    (index, result) is called in the caller's thread as each finishes, in index order
    within a round, and ``on_round()`` before each round's download; an exception from
    either or from a fit abandons the others and is raised."""

    def __init__(self, width: int, groups: int = 1) -> None:
        if width < 1 or groups < 1:
            raise ValueError(f"lockstep width and groups must be ≥ 1, got {width}, {groups}")
        self.width = width
        self.groups = min(groups, width)
        self.rounds = 0
        self.host_s = 0.0  # the fits' own turns (host work, launches queued)
        self.download_s = 0.0  # the rounds' downloads (the device catching up)
        # One semaphore per fit and one back: a turn wakes exactly one thread (a shared
        # condition woke all of them per turn, 64 fits × 64 turns × each round).
        self._back = threading.Semaphore(0)
        self._abandon = False

    def run(self, fits: Sequence[Callable[[], T]],
            on_done: Callable[[int, T], Any] | None = None,
            on_round: Callable[[], Any] | None = None) -> list[T]:
        jobs = [_Fit(i, f) for i, f in enumerate(fits)]
        waiting_to_start = list(jobs)
        live: list[_Fit[T]] = []
        ready: list[_Fit[T]] = []  # to be given a turn: new, or their download arrived
        in_flight: deque[tuple[list[_Fit[T]], PendingDownload]] = deque()
        group = -(-self.width // self.groups)
        failure: BaseException | None = None
        try:
            while waiting_to_start or live:
                while waiting_to_start and len(live) < self.width:
                    job = waiting_to_start.pop(0)
                    self._start(job)
                    live.append(job)
                    ready.append(job)
                turn, ready = ready[:group], ready[group:]
                for job in turn:
                    self._give_turn(job)
                for job in [j for j in turn if j.state == "done"]:
                    live.remove(job)
                    if job.error is not None:
                        raise job.error
                    if on_done is not None:
                        on_done(job.index, job.result)
                waiting = [j for j in turn if j.state == "waiting"]
                if waiting:
                    if on_round is not None:
                        on_round()  # before the round's download (a cancel skips it)
                    in_flight.append((waiting, start_download_many(
                        [j.queued for j in waiting], SITE)))
                    self.rounds += 1
                # Wait for the oldest download once no fit is left to run, or once as
                # many groups are in flight as there are (never more: one is issued per
                # pass): the device works through the newer group's launches while the
                # host runs the older one's turns.
                if in_flight and (not ready or len(in_flight) >= self.groups):
                    arrived, pending = in_flight.popleft()
                    t0 = time.perf_counter()
                    hosts = pending.wait()
                    self.download_s += time.perf_counter() - t0
                    for job, host in zip(arrived, hosts, strict=True):
                        job.queued, job.host = None, host
                    ready += arrived
        except BaseException as exc:
            failure = exc
            raise
        finally:
            for _, pending in in_flight:  # their copies land before the buffers return
                pending.wait()
            if failure is not None:
                self._abandon_all(live)
        return [j.result for j in jobs]

    # -- the caller's side ------------------------------------------------------------
    def _start(self, job: _Fit[T]) -> None:
        # The caller's context too (its progress and plausibility switches).
        context = contextvars.copy_context()
        job.thread = threading.Thread(target=context.run, args=(self._body, job),
                                      daemon=True, name=f"lockstep-{job.index}")
        job.thread.start()

    def _give_turn(self, job: _Fit[T]) -> None:
        """Let ``job`` run until it queues a download or finishes."""
        t0 = time.perf_counter()
        job.go.release()
        self._back.acquire()
        self.host_s += time.perf_counter() - t0

    def _abandon_all(self, live: list[_Fit[T]]) -> None:
        self._abandon = True
        for job in live:
            if job.state != "done":
                self._give_turn(job)  # it raises Abandoned where it waits and unwinds
        for job in live:
            if job.thread is not None:
                job.thread.join()

    # -- a fit's side -------------------------------------------------------------------
    def _body(self, job: _Fit[T]) -> None:
        job.go.acquire()
        job.state = "running"
        try:
            if self._abandon:
                raise Abandoned
            with downloads_through(lambda x: self._wait_for_download(job, x)):
                job.result = job.run()
        except BaseException as exc:  # handed to the caller's thread
            job.error = exc
        finally:
            job.state = "done"
            self._back.release()

    def _wait_for_download(self, job: _Fit[T], array: Any) -> Any:
        if self._abandon:
            raise Abandoned
        job.queued, job.state = array, "waiting"
        self._back.release()
        job.go.acquire()
        job.state = "running"
        if self._abandon:
            raise Abandoned
        host, job.host = job.host, None
        return host

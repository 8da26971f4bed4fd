"""Fit progress: tqdm bars (``progress=True``) or a callback ``(stage, done, total)``.

Stages are "search" (trials scored of this search's total), "newton" (iterations of
the maximum; reported as done when Newton stops), "lattice" (crystal mode's steps after
the per-bin fit: the first lattice, two rounds of the lattice refined and Newton, the
errors, the thin object's fit) and "reconstruct" (reported by callers that reconstruct
after a fit, e.g. the widget).

A callback stops a fit by raising :class:`Cancelled` (any exception does; this one
says it was asked for): it propagates out of ``Session.fit``/``refine``/``fit_map`` at
the next report (a search batch, a Newton iteration, a map tile), the session keeping
what it held before the call.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

from ..progress import bar

ProgressCallback = Callable[[str, int, int], None]
Progress = bool | ProgressCallback


class Cancelled(Exception):  # noqa: N818 (a stop asked for, not an error)
    """Raised by a progress callback to stop the running fit, refinement or map.

    ``Session.fit``, ``refine`` and ``fit_map`` let it propagate and keep their state
    as before the call (``full_fit``, ``rotation_deg``, ``transpose``, ``regions``,
    ``maps``; a window's spectra are released): the session is ready for the next fit.
    ``livessb.SSBWidget.cancel()`` raises it through the widget's own callback.
    """


def callback_of(progress: Progress) -> ProgressCallback | None:
    """The callback of ``progress``, or None for the bool forms."""
    if isinstance(progress, bool):
        return None
    if not callable(progress):
        raise ValueError(f"progress must be True, False or a callable (stage, done, total), "
                         f"got {progress!r}")
    return progress


class NewtonProgress:
    """Reports Newton iterations of ``total`` to ``report``: 0 on start, each iteration,
    and ``total`` once it stops (converged early or not)."""

    def __init__(self, report: ProgressCallback, total: int) -> None:
        self.report, self.total, self.done = report, total, 0
        report("newton", 0, total)

    def iteration(self) -> None:
        self.done = min(self.done + 1, self.total)
        self.report("newton", self.done, self.total)

    def finish(self) -> None:
        self.report("newton", self.total, self.total)


class StepProgress:
    """The steps of one stage: ``(stage, done, total)`` to a callback, 0 on entering,
    and a tqdm bar where ``progress`` is True (drawn once it lasts, ``livessb.progress``).
    A context manager: the bar closes however the stage ends."""

    def __init__(self, progress: Progress, stage: str, total: int, label: str) -> None:
        self.report = callback_of(progress)
        self.stage, self.total, self.done, self.label = stage, total, 0, label
        self.bar: Any = None
        self.progress = progress

    def __enter__(self) -> StepProgress:
        if self.progress is True:
            self.bar = bar(self.label, total=self.total, unit="step")
        if self.report is not None:
            self.report(self.stage, 0, self.total)
        return self

    def step(self) -> None:
        self.done = min(self.done + 1, self.total)
        if self.bar is not None:
            self.bar.update(1)
        if self.report is not None:
            self.report(self.stage, self.done, self.total)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self.bar is not None:
            self.bar.close()

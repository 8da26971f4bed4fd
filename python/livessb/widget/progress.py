"""Fit progress as the widget's ``progress`` trait: ``{stage, done, total, elapsed_s}``.

The session reports every scored batch and Newton iteration; the trait is set at
most every ``interval_s`` within a stage (a stage's first and last report always
pass), so the comm is not flooded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["IDLE", "ProgressReporter"]

IDLE: dict[str, Any] = {"stage": "", "done": 0, "total": 0, "elapsed_s": 0.0}


class ProgressReporter:
    """A ``progress=callable(stage, done, total)`` for Session fits, publishing to ``publish``."""

    def __init__(self, publish: Callable[[dict[str, Any]], None],
                 interval_s: float = 0.1) -> None:
        self._publish = publish
        self._interval_s = interval_s
        self._t0 = time.perf_counter()
        self._last_t = -float("inf")
        self._last_stage = ""

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = time.perf_counter()
        same_stage = stage == self._last_stage
        if same_stage and done < total and now - self._last_t < self._interval_s:
            return
        self._last_t, self._last_stage = now, stage
        self._publish({"stage": str(stage), "done": int(done), "total": int(total),
                       "elapsed_s": round(now - self._t0, 3)})

    def idle(self) -> None:
        self._publish(dict(IDLE))

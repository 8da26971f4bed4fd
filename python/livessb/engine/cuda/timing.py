"""Stage timing of the CUDA engine: one decorator instead of paired wrapper methods.

Each timed stage adds to ``stats``: ``<stage>_s`` (wall seconds, host side),
``<stage>_calls`` and ``<stage>_candidates`` (candidates the call covered). A call
that raises is not counted.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar


class Timed(Protocol):
    stats: dict[str, float]


S = TypeVar("S", bound=Timed)
P = ParamSpec("P")
R = TypeVar("R")


def add_seconds(stats: dict[str, float], key: str, seconds: float) -> None:
    stats[key] = stats.get(key, 0.0) + seconds


def record(stats: dict[str, float], stage: str, seconds: float, n: int = 1) -> None:
    add_seconds(stats, stage + "_s", seconds)
    stats[stage + "_calls"] = stats.get(stage + "_calls", 0) + 1
    stats[stage + "_candidates"] = stats.get(stage + "_candidates", 0) + n


def timed(
    stage: str, count: Callable[[Any], int] | None = None
) -> Callable[[Callable[Concatenate[S, P], R]], Callable[Concatenate[S, P], R]]:
    """Time a method as ``stage``; ``count(result)`` is its candidates (default 1)."""

    def wrap(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
        @functools.wraps(method)
        def timed_method(self: S, *args: P.args, **kwargs: P.kwargs) -> R:
            t0 = time.perf_counter()
            out = method(self, *args, **kwargs)
            record(self.stats, stage, time.perf_counter() - t0,
                   1 if count is None else count(out))
            return out

        return timed_method

    return wrap

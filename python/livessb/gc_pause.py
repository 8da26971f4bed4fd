"""Python's cyclic garbage collector paused while a session operation runs.

A full collection walks every tracked object of the process (a kernel with CuPy and a
session holds a few hundred thousand: ~80 ms on this 2-core machine), and it fires
when a quarter more objects have survived since the last one. A map keeps 64 tiles'
trial and Newton records (tens of thousands of dicts), so every other map paid one in
the middle of its tiles. Paused, the collection runs at the first allocation after the
operation (the notebook's or the widget's time, not the fit's); no garbage is lost,
reference counting frees everything that is not in a cycle as before.
"""

from __future__ import annotations

import functools
import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])

_lock = threading.Lock()
_depth = 0  # operations running (nested or in other threads)
_paused_here = False  # whether this module disabled the collector


@contextmanager
def collection_paused() -> Iterator[None]:
    """No cyclic collection inside; the collector as before once the outermost
    operation ends (left alone when the caller had disabled it)."""
    global _depth, _paused_here
    with _lock:
        if _depth == 0 and gc.isenabled():
            gc.disable()
            _paused_here = True
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _paused_here:
                _paused_here = False
                gc.enable()


def gc_paused(method: F) -> F:
    """Decorator form of :func:`collection_paused`."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with collection_paused():
            return method(*args, **kwargs)
    return cast(F, wrapper)

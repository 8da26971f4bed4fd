"""Host round trips, counted: every device→host transfer and every call that waits for
the device on the engine's path goes through here.

A CuPy array read on the host (``.get()``, ``float(x)``, ``int(x)``), a size taken from
data (``nonzero``, ``bincount`` without a fixed length, boolean indexing) or a scalar
reduction read back each stops the host until the GPU has caught up. One of them per
candidate batch is fine; one per frequency, BF chunk, block row or tile turns a
millisecond operation into seconds (the 3× regression of 2fd8bb7). The helpers here
behave the same for NumPy, so a test on a machine without a GPU can count what the GPU
would wait for (``counting``) and hold each operation to a budget that does not grow
with the problem (tests/test_host_syncs.py).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

__all__ = ["SyncCount", "counting", "host_float", "module_of", "resident", "to_host"]


class SyncCount(Counter[str]):
    """Host round trips by kind (``transfer``, ``scalar``) and by site (``site:NAME``)."""

    @property
    def transfers(self) -> int:
        return self["transfer"]

    @property
    def scalars(self) -> int:
        return self["scalar"]

    @property
    def round_trips(self) -> int:
        return self["transfer"] + self["scalar"]


_local = threading.local()


def _active() -> list[SyncCount]:
    stack: list[SyncCount] | None = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


@contextmanager
def counting() -> Iterator[SyncCount]:
    """Count the host round trips of this thread inside the block (nested blocks each
    see their own and their inner blocks' round trips)."""
    count = SyncCount()
    stack = _active()
    stack.append(count)
    try:
        yield count
    finally:
        stack.remove(count)


def _record(kind: str, site: str) -> None:
    for count in _active():
        count[kind] += 1
        count["site:" + site] += 1


def _download(x: Any) -> Any:
    return x.get() if hasattr(x, "get") and not isinstance(x, np.ndarray) else x


def to_host(x: Any, site: str = "?", dtype: Any = None) -> np.ndarray:
    """``x`` as a NumPy array (a device array downloaded: one counted transfer)."""
    _record("transfer", site)
    return np.asarray(_download(x), dtype=dtype)


def host_float(x: Any, site: str = "?") -> float:
    """A 0-d (or one-element) array read on the host: one counted scalar sync."""
    _record("scalar", site)
    return float(np.asarray(_download(x)).reshape(()))


def module_of(x: Any) -> Any:
    """The array module of ``x``: CuPy for a CuPy array (or a wrapper exposing one as
    ``device_array``), else NumPy."""
    return resident(x)[0]


def resident(x: Any) -> tuple[Any, Any]:
    """(array module, array to compute on) of ``x``: a wrapper's ``device_array`` on its
    GPU (CuPy), else ``x`` itself with NumPy."""
    array = getattr(x, "device_array", x)
    if type(array).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy, array
    return np, x

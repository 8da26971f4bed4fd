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

import ctypes
import mmap
import threading
import weakref
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

__all__ = ["SyncCount", "counting", "download_many", "downloads_through", "host_float",
           "module_of", "resident", "to_host"]


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
    deferred: Any = getattr(_local, "deferred", None)
    if deferred is not None:  # a lockstep fit: the download waits for its round's one
        return deferred(x)
    if not hasattr(x, "get") or isinstance(x, np.ndarray):
        return x
    if x.nbytes >= HostBlocks.MIN_BYTES and x.flags.c_contiguous:
        out = _HOST_BLOCKS.array(tuple(x.shape), x.dtype)
        x.get(out=out)
        return out
    return x.get()


class HostBlocks:
    """Host memory for large downloads (an Auto image: 19 MB), reused once every array
    over a block is gone. A fresh NumPy array's pages fault on first touch as the copy
    lands (~5 ms for 19 MB on the H200's host: the Auto reconstruction after region
    edits, whose crops no longer bring a full image whose freed pages malloc reused);
    a reused block's pages are resident. The arrays are ordinary NumPy arrays (views of
    a ctypes buffer over an anonymous mapping); a block returns only when its last view
    dies, and at most KEEP free blocks are kept."""

    MIN_BYTES = 4 << 20
    KEEP = 4

    def __init__(self) -> None:
        self._free: list[mmap.mmap] = []
        self._lock = threading.Lock()

    def array(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        dt = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        block = None
        with self._lock:
            for i, m in enumerate(self._free):
                if len(m) == nbytes:
                    block = self._free.pop(i)
                    break
        if block is None:
            block = mmap.mmap(-1, nbytes)
        owner = (ctypes.c_char * nbytes).from_buffer(block)
        weakref.finalize(owner, self._give, block)
        out: np.ndarray = np.ctypeslib.as_array(owner).view(dt).reshape(shape)
        return out

    def _give(self, block: mmap.mmap) -> None:
        # (called as the buffer's owner dies, before it lets go of the mapping: a block
        # not kept is left to be unmapped with its last reference, not closed here)
        with self._lock:
            if len(self._free) < self.KEEP:
                self._free.append(block)

    def free_blocks(self) -> int:
        with self._lock:
            return len(self._free)


_HOST_BLOCKS = HostBlocks()


@contextmanager
def downloads_through(deferred: Any) -> Iterator[None]:
    """Inside the block this thread's downloads go to ``deferred(array) -> host array``
    instead (fit.lockstep: many window fits share one transfer per round); not counted
    here, the round's one transfer is (``download_many``)."""
    _local.deferred = deferred
    try:
        yield
    finally:
        _local.deferred = None


def download_many(arrays: list[Any], site: str = "?") -> list[np.ndarray]:
    """Every array of ``arrays`` on the host, the device ones packed into ONE transfer
    (one counted round trip, as many arrays as there are)."""
    return start_download_many(arrays, site).wait()


class PendingDownload:
    """A ``download_many`` under way: ``wait()`` blocks until its copy has landed (only
    as long as the device needs to reach it in stream order) and returns the arrays."""

    def __init__(self, out: list[Any], packed: list[tuple[int, int, Any, tuple[int, ...]]],
                 host: np.ndarray | None, done: Any = None, keep: Any = None) -> None:
        self._out, self._packed, self._host, self._done = out, packed, host, done
        self._keep = keep  # the packed device buffer, alive until the copy has landed

    def wait(self) -> list[np.ndarray]:
        if self._done is not None:
            self._done.synchronize()
            self._done = self._keep = None
        if self._host is not None:
            for i, start, dtype, shape in self._packed:
                n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
                self._out[i] = self._host[start:start + n].view(dtype).reshape(shape).copy()
            _STAGING.give(self._host)
            self._host = None
        return self._out


class _PinnedStaging:
    """Page-locked host buffers for asynchronous downloads, reused (a map's rounds need
    two at a time), kept for the process: not CuPy's pinned pool, which a session's
    close frees block by block."""

    KEEP_BYTES = 64 << 20  # larger ones are freed after use

    def __init__(self) -> None:
        self._free: list[np.ndarray] = []
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> np.ndarray:
        with self._lock:
            for i, buf in enumerate(self._free):
                if buf.size >= nbytes:
                    return self._free.pop(i)
        import cupy as cp

        size = max(nbytes, 1 << 20)
        # Outside CuPy's pinned pool; the array keeps the pointer (and its memory) alive.
        pointer = cp.cuda.PinnedMemoryPointer(cp.cuda.PinnedMemory(size), 0)
        return np.ndarray((size,), dtype=np.uint8, buffer=pointer)

    def give(self, buf: np.ndarray) -> None:
        if buf.size <= self.KEEP_BYTES:
            with self._lock:
                self._free.append(buf)


_STAGING = _PinnedStaging()


def start_download_many(arrays: list[Any], site: str = "?") -> PendingDownload:
    """``download_many`` begun: the device arrays packed into one buffer and its copy to
    page-locked host memory queued on the current stream (one counted round trip); the
    host goes on until ``wait()``. Host arrays are passed through."""
    _record("transfer", site)
    out: list[Any] = [None] * len(arrays)
    packed: list[tuple[int, int, Any, tuple[int, ...]]] = []
    pieces: list[Any] = []
    offset = 0
    for i, a in enumerate(arrays):
        if not hasattr(a, "get") or isinstance(a, np.ndarray):
            out[i] = np.asarray(a)
            continue
        xp = module_of(a)
        flat = xp.ascontiguousarray(a).reshape(-1).view(xp.uint8)
        pad = -flat.size % 16  # each piece starts aligned for its dtype
        pieces += [flat] if not pad else [flat, xp.zeros(pad, dtype=xp.uint8)]
        packed.append((i, offset, a.dtype, tuple(a.shape)))
        offset += flat.size + pad
    if not packed:
        return PendingDownload(out, [], None)
    xp = module_of(pieces[0])
    device = xp.concatenate(pieces)
    host = _STAGING.take(offset)
    stream = xp.cuda.get_current_stream()
    device.data.copy_to_host_async(ctypes.c_void_p(host.ctypes.data), offset, stream)
    done = xp.cuda.Event(disable_timing=True)
    done.record(stream)
    return PendingDownload(out, packed, host, done, keep=device)


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

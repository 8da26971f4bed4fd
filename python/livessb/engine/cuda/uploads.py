"""Small host tables (candidate rows, rotation turns) to the device without a blocking
copy each.

``cupy.asarray`` of a (25, 8) table takes 17 µs on the H200's host (25 µs while the
device is busy: a pageable copy is staged by the driver) and a map tile uploads ~22 of
them. Here a table is written into a page-locked ring (one per process) and copied
asynchronously on the current stream into the same offset of the engine's device ring
(4 µs): the kernel that reads it is queued after the copy in stream order, and a later
copy into the same device bytes after that kernel. The ring has two halves; before the host
writes into a half again it waits for the event recorded when it last left that half,
i.e. for the copies out of it (long done: a half holds hundreds of tables). A table must
be launched with before another half's worth of uploads (``HALF_BYTES``) is queued —
every caller launches right after its upload.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

HALF_BYTES = 1 << 19
_ALIGN = 256  # each table at an offset aligned for any dtype (and for coalescing)
_HOST_TO_DEVICE = 1  # cudaMemcpyHostToDevice


class _HostRing:
    """The page-locked ring and its offsets, one per process (kept: freeing page-locked
    memory at every close would cost the close a millisecond); the engines' device rings
    are written at the offsets it hands out."""

    def __init__(self, cp: Any) -> None:
        size = 2 * HALF_BYTES
        # Outside CuPy's pinned pool (a session's close frees that one block by block).
        pinned = cp.cuda.PinnedMemoryPointer(cp.cuda.PinnedMemory(size), 0)
        self.host = np.ndarray((size,), dtype=np.uint8, buffer=pinned)
        self._offset = 0
        self._half = 0
        self._left: list[Any] = [None, None]
        self.lock = threading.Lock()

    def claim(self, cp: Any, span: int, stream: Any) -> int:
        """The offset of the next ``span`` bytes (the caller holds ``lock``)."""
        start = self._offset
        if start // HALF_BYTES != (start + span - 1) // HALF_BYTES or (
                start + span > 2 * HALF_BYTES):
            start = ((start // HALF_BYTES + 1) % 2) * HALF_BYTES
        half = start // HALF_BYTES
        if half != self._half:  # leaving a half: the copies out of it end at this event
            left = cp.cuda.Event(disable_timing=True)
            left.record(stream)
            self._left[self._half] = left
            if self._left[half] is not None:
                self._left[half].synchronize()
            self._half = half
        self._offset = start + span
        return start


_RING: list[_HostRing] = []
_RING_LOCK = threading.Lock()


def _host_ring(cp: Any) -> _HostRing:
    with _RING_LOCK:
        if not _RING:
            _RING.append(_HostRing(cp))
        return _RING[0]


class TableUploads:
    """One engine's device ring (freed with the engine's pool at close)."""

    def __init__(self, cp: Any) -> None:
        self._cp = cp
        self._ring = _host_ring(cp)
        self._device = cp.empty(2 * HALF_BYTES, dtype=cp.uint8)

    def arrays(self) -> tuple[Any, ...]:
        """The device memory held (``memory_info`` counts it)."""
        return (self._device,)

    def put(self, table: np.ndarray) -> Any:
        """``table`` on the device (a view of the ring; larger tables: an ordinary copy)."""
        cp = self._cp
        a = np.ascontiguousarray(table)
        span = -(-max(a.nbytes, 1) // _ALIGN) * _ALIGN
        if span > HALF_BYTES:
            return cp.asarray(a)
        stream = cp.cuda.get_current_stream()
        ring = self._ring
        with ring.lock:
            start = ring.claim(cp, span, stream)
            ring.host[start:start + a.nbytes] = a.reshape(-1).view(np.uint8)
            cp.cuda.runtime.memcpyAsync(self._device.data.ptr + start,
                                        ring.host.ctypes.data + start, a.nbytes,
                                        _HOST_TO_DEVICE, stream.ptr)
        return cp.ndarray(a.shape, dtype=a.dtype, memptr=self._device.data + start)

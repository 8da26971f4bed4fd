"""Release the pages of a memory-mapped file behind a streaming pass.

A pass over a memory-mapped ``.npy`` (the load's checks, the mean pattern, the descan
measurement, the BF gather) maps every page it reads into the process: its resident
set grows to the file's size although nothing is copied. ``release_pages(view)`` after
each block unmaps that block's pages (``MADV_DONTNEED``); they stay in the page cache,
so reading them again costs no disk access. Only shared mappings (``np.memmap`` modes
``r``, ``r+``, ``w+``) are released: a copy-on-write mapping (mode ``c``) would lose its
changes. Anything else (in-memory arrays, h5py datasets) is left alone.
"""

from __future__ import annotations

import mmap
from typing import Any

import numpy as np

_SHARED_MODES = ("r", "r+", "w+", "readonly", "readwrite", "write")


def release_pages(view: Any) -> None:
    """Unmap the whole pages inside ``view`` (an ``np.memmap`` or a view of one) from
    this process; a no-op for anything that is not a shared file mapping."""
    mm = getattr(view, "_mmap", None)
    if (mm is None or not isinstance(view, np.ndarray) or view.size == 0
            or getattr(view, "mode", "c") not in _SHARED_MODES
            or not hasattr(mm, "madvise") or not hasattr(mmap, "MADV_DONTNEED")):
        return
    try:
        base = np.frombuffer(mm, dtype=np.uint8).ctypes.data
    except (ValueError, TypeError):  # a closed mapping
        return
    lo = hi = view.ctypes.data
    for n, stride in zip(view.shape, view.strides, strict=True):
        span = (n - 1) * stride
        lo, hi = (lo + span, hi) if span < 0 else (lo, hi + span)
    hi += view.itemsize
    page = mmap.PAGESIZE
    start = -(-(lo - base) // page) * page  # whole pages inside the view only
    stop = (hi - base) // page * page
    if stop > start:
        mm.madvise(mmap.MADV_DONTNEED, start, stop - start)

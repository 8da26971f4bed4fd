"""Host BLAS on one thread where livessb's host linear algebra is many small calls.

Crystal mode's host stages (``fit.lattice.with_lattice``: L-BFGS-B's two-loop products
over ~250 numbers, solves over ~100 lattice points, dot products of 50 000) make thousands
of small BLAS calls: OpenBLAS wakes its threads for each and lets them spin after it, which
costs more than the call (and, on the CPU engine, takes cores from the Numba kernels).
Measured on 2 cores (benchmarks/README.md, twentieth session): L-BFGS-B's own step 2.0 →
0.09 ms, the thin object's L-BFGS 5.1 → 2.6 s, a crystal-mode 16² region 7.0 → 4.8 s; the
per-bin fits, Numba-bound, were the same within the machine's noise and are left as they
were.

``one_blas_thread`` sets OpenBLAS (NumPy's and SciPy's libraries) to one thread while any
thread is inside it, and gives back the count found when the first entered once the last
has left (nested extents, and a widget's worker thread beside the notebook's, overlap).
It sets through ``openblas_set_num_threads_local``: the process-wide setter is ignored
from other threads once the main thread has called it. A BLAS without that call (MKL,
Accelerate, OpenBLAS before 0.3.27) is left as it is.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# SciPy's own BLAS (L-BFGS-B's) loaded before the libraries are listed
import scipy.linalg
import scipy.optimize  # noqa: F401
from threadpoolctl import ThreadpoolController


class _OneThread:
    """The count of extents inside, the setters and the counts to give back."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.inside = 0
        self.setters: list[Any] | None = None
        self.before: list[int] = []

    def enter(self) -> None:
        with self.lock:
            if self.setters is None:
                self.setters = _per_thread_setters()
            if self.inside == 0:
                self.before = [setter(1) for setter in self.setters]
            self.inside += 1

    def leave(self) -> None:
        with self.lock:
            self.inside -= 1
            if self.inside == 0 and self.setters is not None:
                for setter, count in zip(self.setters, self.before, strict=True):
                    setter(count)


def _per_thread_setters() -> list[Any]:
    """``openblas_set_num_threads_local`` of every loaded OpenBLAS that has it (listing
    the libraries costs ~1 ms: once)."""
    found = []
    for lib in ThreadpoolController().lib_controllers:
        if lib.internal_api != "openblas":
            continue
        setter = getattr(ctypes.CDLL(lib.filepath), "openblas_set_num_threads_local", None)
        if setter is not None:
            setter.argtypes, setter.restype = [ctypes.c_int], ctypes.c_int
            found.append(setter)
    return found


_ONE_THREAD = _OneThread()


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """OpenBLAS on one thread inside (module docstring)."""
    _ONE_THREAD.enter()
    try:
        yield
    finally:
        _ONE_THREAD.leave()

"""Device memory of the CUDA engine: pools, cuFFT plans, out-of-memory messages, the BF
upload and the reusable spectra buffers. Importing this module does not import CuPy.
"""

from __future__ import annotations

import contextlib
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ...physics.geometry import BFPixels
from .. import cuda_kernels as ck
from ..protocol import DeviceMemoryError
from .launch import GatherBFArgs, launch

MAX_PLANS = 16
HOST_SLAB_BYTES = 64 << 20  # whole patterns per upload of host counts

# cuFFT plans live for the process, keyed by shape, and take their work areas from a
# dedicated pool: closing a session then returns the default pool to its baseline
# without destroying plans (cufftDestroy costs ~10 ms each), and the next session
# reuses them. ``plan_pool_bytes()`` reports what they hold.
_PLANS: dict[tuple[Any, ...], Any] = {}
_PLAN_POOL: Any = None
_PLANNER: ThreadPoolExecutor | None = None  # makes the plans (see _planner)
_PLANNER_LOCK = threading.Lock()
# Closing hands the pooled blocks back to the device on a worker thread (cudaFree of a
# session's ~14 GiB takes ~18 ms on the H200, which close need not wait for); the pools
# are thread-safe. ``wait_for_release`` joins it: a new engine does, before its baseline.
_RELEASES: list[threading.Thread] = []


def wait_for_release() -> None:
    """Return once every closed engine's pooled memory is back on the device."""
    while _RELEASES:
        _RELEASES.pop(0).join()


def fft_plan(x: Any, value_type: str, shape: tuple[int, int] | None = None) -> Any:
    import cupy as cp

    device = cp.cuda.runtime.getDevice()
    key = (x.shape, x.dtype.str, value_type, shape, device)
    plan = _PLANS.pop(key, None)
    if plan is None:
        plan = _planner().submit(_make_plan, x, value_type, shape, device).result()
        while len(_PLANS) >= MAX_PLANS:
            _PLANS.pop(next(iter(_PLANS)))
    _PLANS[key] = plan  # most recently used last
    return plan


def _planner() -> ThreadPoolExecutor:
    """The one thread that makes cuFFT plans. CuPy's get_fft_plan gives the calling thread
    its own plan cache, and when that thread ends CuPy's finalizer of the cache runs a full
    gc.collect() (80-120 ms on the H200's host): a map tile's thread made a session's first
    64² plan and its end stalled the first map. This thread lives as long as the process."""
    global _PLANNER
    with _PLANNER_LOCK:
        if _PLANNER is None:
            _PLANNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="livessb-fft-plans")
        return _PLANNER


def _make_plan(x: Any, value_type: str, shape: tuple[int, int] | None, device: int) -> Any:
    global _PLAN_POOL
    import cupy as cp
    import cupyx.scipy.fft as cfft

    with cp.cuda.Device(device):
        if _PLAN_POOL is None:
            _PLAN_POOL = cp.cuda.MemoryPool()
        with cp.cuda.using_allocator(_PLAN_POOL.malloc):
            return cfft.get_fft_plan(x, shape=shape, axes=(-2, -1), value_type=value_type)


def planned_irfft2(cp: Any, H: Any, shape: tuple[int, int]) -> Any:
    """``cp.fft.irfft2`` with a process-cached cuFFT plan."""
    with fft_plan(H, "C2R", shape):
        return cp.fft.irfft2(H, s=shape)


def plan_pool_bytes() -> int:
    return 0 if _PLAN_POOL is None else int(_PLAN_POOL.total_bytes())


def device_bytes(arrays: Iterable[Any], array_type: type) -> int:
    """Bytes of the distinct ``array_type`` arrays among ``arrays``: geometry rows shared
    by several windows count once."""
    distinct: dict[int, Any] = {id(a): a for a in arrays if isinstance(a, array_type)}
    return sum(int(a.nbytes) for a in distinct.values())


def device_array_of(counts: Any) -> Any:
    """The CuPy array behind ``counts`` (a cupy.ndarray or a DeviceCounts), else None."""
    dev = getattr(counts, "device_array", None)
    if dev is not None:
        return dev
    try:
        import cupy as cp
    except ImportError:  # pragma: no cover
        return None
    return counts if isinstance(counts, cp.ndarray) else None


def upload_bf_counts(cp: Any, counts: Any, bf: BFPixels, out: Any = None) -> Any:
    """BF pixels of every pattern as (B, Rr, Rc) in the counts' native dtype, written
    into ``out`` where given (a resident buffer of that shape and dtype: the next scan's
    counts replace the last one's without a new allocation)."""
    Rr, Rc = counts.shape[:2]
    B = bf.count
    P = Rr * Rc
    if out is None:
        out = cp.empty((B, Rr, Rc), dtype=counts.dtype)
    corrected = getattr(counts, "bf_row", None)
    if corrected is not None:  # livessb.preprocess.CorrectedCounts: CuPy ops per scan row
        for r in range(Rr):
            out[:, r, :] = corrected(cp, r, bf.rows, bf.cols).T
        return out
    kr, kc = counts.shape[2:]
    idx = cp.asarray((bf.rows * kc + bf.cols).astype(np.int32))
    kern = ck.kernel("gather_bf", counts.dtype)
    flat_out = out.reshape(B, P)
    dev = device_array_of(counts)
    if dev is not None:  # gather on the device, a slab of scan rows at a time
        flat = cp.ascontiguousarray(dev).reshape(P, kr * kc)
        rows_per = max(1, (1 << 22) // max(1, Rc))
        for r0 in range(0, Rr, rows_per):
            _gather_slab(kern, flat[r0 * Rc:], min(rows_per, Rr - r0) * Rc, r0 * Rc, idx,
                         flat_out)
        return out
    # Host counts (memmaps too): slabs of whole patterns copied up, gathered there (a
    # gather on the host, fancy indexing every pattern, took longer: benchmarks/README).
    rows_per = max(1, HOST_SLAB_BYTES // max(1, Rc * kr * kc * counts.dtype.itemsize))
    slab = cp.empty((min(rows_per, Rr) * Rc, kr * kc), dtype=counts.dtype)
    for r0 in range(0, Rr, rows_per):
        n = min(rows_per, Rr - r0)
        slab[:n * Rc].set(np.ascontiguousarray(counts[r0:r0 + n]).reshape(n * Rc, kr * kc))
        _gather_slab(kern, slab, n * Rc, r0 * Rc, idx, flat_out)
    return out


def resident_bf_counts(cp: Any, memory: DeviceMemory, counts: Any, bf: BFPixels, out: Any,
                       close_breakdown: dict[str, float]) -> Any:
    """``upload_bf_counts`` for an engine to hold: out of device memory, the pools are
    returned (their times into ``close_breakdown``) and a DeviceMemoryError says what."""
    try:
        return upload_bf_counts(cp, counts, bf, out=out)
    except cp.cuda.memory.OutOfMemoryError as exc:
        del out
        close_breakdown.update(memory.free_pools())
        need = bf.count * int(np.prod(counts.shape[:2])) * np.dtype(counts.dtype).itemsize
        raise DeviceMemoryError(
            memory.oom_message("uploading the BF counts", need, exc)) from None


def memory_report(memory: DeviceMemory, counts: Any, live: list[Any],
                  geometry_arrays: list[Any]) -> dict[str, Any]:
    """``Engine.memory_info`` of the CUDA engine: what it holds, by kind, and the pool."""
    import cupy as cp

    counts_b = 0 if counts is None else int(counts.nbytes)
    spectra = sum(int(s.G.nbytes) for s in live if s.G is not None)
    cached = memory.buffers.nbytes() + device_bytes(memory.constant_arrays(), cp.ndarray)
    geometry = device_bytes([*geometry_arrays, *(a for s in live for a in s.part.arrays())],
                            cp.ndarray)
    pool = memory.pool_bytes()
    return {"live_bytes": counts_b + spectra + cached + geometry, "bf_counts_bytes": counts_b,
            "geometry_and_mask_bytes": geometry, "fft_plan_pool_bytes": plan_pool_bytes(),
            "spectra_bytes": spectra, "reusable_buffer_bytes": cached,
            "pool_used_bytes": pool["used_bytes"], "pool_total_bytes": pool["total_bytes"],
            "pool_baseline": memory.baseline}


def _gather_slab(kern: Any, flat: Any, npos: int, pos0: int, idx: Any, flat_out: Any) -> None:
    """gather_bf of the ``npos`` patterns that start ``flat`` (rows of whole patterns)
    into positions pos0… of ``flat_out`` (B, P)."""
    B, P = flat_out.shape
    launch(kern, (-(-npos // ck.GATHER_TILE), -(-B // ck.GATHER_TILE)), (256,),
           GatherBFArgs(flat, np.int64(npos), np.int64(pos0), np.int32(flat.shape[1]), idx,
                        np.int32(B), np.int64(P), flat_out))


class SpectraBuffers:
    """Released spectra buffers by shape, reused by the next preparation of that shape."""

    def __init__(self, cp: Any) -> None:
        self._cp = cp
        self._by_shape: dict[tuple[int, int], Any] = {}

    def take(self, shape: tuple[int, int]) -> Any:
        buf = self._by_shape.pop(shape, None)
        if buf is None:
            buf = self._cp.empty(shape, dtype=self._cp.complex64)
        return buf

    def keep(self, G: Any) -> None:
        if G.shape not in self._by_shape:
            self._by_shape[G.shape] = G

    def nbytes(self) -> int:
        return sum(int(b.nbytes) for b in self._by_shape.values())

    def clear(self) -> None:
        self._by_shape.clear()


class DeviceMemory:
    """The default pool's baseline and state, out-of-memory messages, freeing the pools."""

    def __init__(self, cp: Any, staging_bytes: int) -> None:
        self._cp = cp
        self.staging_bytes = staging_bytes
        self.buffers = SpectraBuffers(cp)
        # Small device arrays every window of a shape reads (frequency axes, offset
        # tables): uploaded once, not per map tile; cleared when the engine closes.
        self.constants: dict[tuple[Any, ...], Any] = {}
        wait_for_release()
        self.baseline = self.pool_bytes()

    def constant_arrays(self) -> list[Any]:
        return [a for v in self.constants.values()
                for a in (v if isinstance(v, tuple) else (v,))]

    def constant(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        """``make()``'s device value, made once per ``key`` (until ``constants`` clears)."""
        value = self.constants.get(key)
        if value is None:
            value = self.constants[key] = make()
        return value

    def pool_bytes(self) -> dict[str, int]:
        pool = self._cp.get_default_memory_pool()
        return {"used_bytes": int(pool.used_bytes()), "total_bytes": int(pool.total_bytes())}

    def oom_message(self, what: str, need: int, exc: Exception) -> str:
        free, total = self._cp.cuda.runtime.memGetInfo()
        return (
            f"the GPU ran out of memory while {what}: about {need / 2**30:.2f} GiB needed, "
            f"{free / 2**30:.2f} of {total / 2**30:.2f} GiB free on the device ({exc}). "
            f"Options: a smaller staging budget (Session(..., staging_budget_MiB=...), now "
            f"{self.staging_bytes / 2**20:.0f} MiB), a smaller scan window "
            "(livessb.load(..., scan_region=...)), cropping the detector to the BF disk "
            "(crop_to_bf), or device='cpu'. The session is still usable.")

    @contextlib.contextmanager
    def guard(self, what: str, need: int) -> Iterator[None]:
        """Turn CuPy's out-of-memory error into a DeviceMemoryError naming the options."""
        try:
            yield
        except self._cp.cuda.memory.OutOfMemoryError as exc:
            msg = self.oom_message(what, need, exc)
            self._cp.get_default_memory_pool().free_all_blocks()
            raise DeviceMemoryError(msg) from None

    def free_pools(self) -> dict[str, float]:
        """Return pooled memory to the device; the seconds each step took."""
        cp = self._cp
        t0 = time.perf_counter()
        if _PLAN_POOL is not None:  # unused blocks only; live plans keep their work areas
            _PLAN_POOL.free_all_blocks()
        t1 = time.perf_counter()
        cp.get_default_memory_pool().free_all_blocks()
        t2 = time.perf_counter()
        pinned = cp.get_default_pinned_memory_pool()
        pinned_blocks = int(pinned.n_free_blocks())
        if pinned_blocks:  # (CuPy's own transfers leave a few blocks there)
            pinned.free_all_blocks()
        return {"plan_pool_s": t1 - t0, "free_all_blocks_s": t2 - t1,
                "pinned_s": time.perf_counter() - t2, "pinned_free_blocks": pinned_blocks}

    @staticmethod
    def wait_released() -> None:
        wait_for_release()

    def free_pools_soon(self, timings: dict[str, float], t_close: float) -> None:
        """``free_pools`` on a worker thread; its timings, and ``released_s`` (seconds from
        ``t_close`` until the memory is back), go into ``timings`` when it ends."""
        cp = self._cp
        device = cp.cuda.Device().id

        def release() -> None:
            try:
                with cp.cuda.Device(device):
                    timings.update(self.free_pools())
            except Exception as exc:  # a worker has no caller to raise to: say it
                timings["release_failed"] = 1.0
                warnings.warn(f"livessb: returning GPU memory after close failed ({exc}); "
                              "it stays in CuPy's pool and is reused by the next session",
                              RuntimeWarning, stacklevel=1)
            timings["released_s"] = time.perf_counter() - t_close

        worker = threading.Thread(target=release, name="livessb-release", daemon=True)
        _RELEASES.append(worker)
        worker.start()

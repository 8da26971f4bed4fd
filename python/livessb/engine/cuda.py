"""CuPy engine: resident BF counts, float32 half-plane spectra and fused CUDA kernels.

Same protocol and semantics as ``ArrayEngine`` (the NumPy path is the reference):

* BF counts are gathered once into a ``(B, Rr, Rc)`` device array in the counts'
  native dtype (on the device when the dataset's counts already live there, see
  ``livessb.synthetic_gpu.DeviceDataset4D``).
* ``prepare`` stages windows of pixels (mean-subtracted, zero padded = padded with the
  mean pattern) within the staging budget and takes batched ``rfft2``; the spectra
  ``G`` (B, M) complex64 buffer is reused by the next preparation of the same shape.
* Geometry is never stored per (b, ν): the kernels evaluate the trotter support
  (float64, the NumPy formula) and the aperture from k_b and ν on the fly.
* ``evaluate`` scores a whole (K, 6) batch in one launch, ``derivatives`` returns the
  exact loss, gradient and Hessian of a batch in one launch; ``reconstruct`` runs on
  the (f·Nr, f·Nc) grid in one launch plus one inverse FFT.
* Reductions have a fixed order (thread per ν, b ascending; fixed block trees; host
  sums over block partials), so the same inputs give the same bits on one device.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ..dataset import Dataset4D
from ..params import JOINT, MRAD
from ..physics.geometry import fft_friendly_size, scan_frame_frequencies, trotter_support
from ..physics.optics import aperture, has_higher_order
from ..physics.overlap import PAIRS, overlap_grid
from ..results import Bounds
from . import cuda_kernels as ck
from .array_engine import (
    RECON_EPS,
    ArrayEngine,
    PreparedSpectra,
    _alias_map,
    _half_plane_grid,
)
from .protocol import DeviceMemoryError

MAX_PLANS = 16
GEOMETRY_CACHE = 8  # rotations whose device geometry rows are kept
# Frequency blocks × pixel splits that fill the device for a launch of few candidates:
# about five waves of resident blocks (H200: 132 SMs × 6 of vp_eval<1>, × 3 of vp_derivs).
FILL_BLOCKS_EVAL = 4096
FILL_BLOCKS_DERIV = 2048
MAX_GRID_Z = 65535  # CUDA's limit on gridDim.z (stage_window: one z per staged pixel)

# cuFFT plans live for the process, keyed by shape, and take their work areas from a
# dedicated pool: closing a session then returns the default pool to its baseline
# without destroying plans (cufftDestroy costs ~10 ms each), and the next session
# reuses them. ``plan_pool_bytes()`` reports what they hold.
_PLANS: dict[tuple[Any, ...], Any] = {}
_PLAN_POOL: Any = None


def _fft_plan(x: Any, value_type: str, shape: tuple[int, int] | None = None) -> Any:
    global _PLAN_POOL
    import cupy as cp
    import cupyx.scipy.fft as cfft

    key = (x.shape, x.dtype.str, value_type, shape, cp.cuda.runtime.getDevice())
    plan = _PLANS.pop(key, None)
    if plan is None:
        if _PLAN_POOL is None:
            _PLAN_POOL = cp.cuda.MemoryPool()
        with cp.cuda.using_allocator(_PLAN_POOL.malloc):
            plan = cfft.get_fft_plan(x, shape=shape, axes=(-2, -1), value_type=value_type)
        while len(_PLANS) >= MAX_PLANS:
            _PLANS.pop(next(iter(_PLANS)))
    _PLANS[key] = plan  # most recently used last
    return plan


def plan_pool_bytes() -> int:
    return 0 if _PLAN_POOL is None else int(_PLAN_POOL.total_bytes())


def _candidate_table(candidates: np.ndarray, pad_to: int = 1) -> np.ndarray:
    """(K, 8) float64 rows: C10, C12, cos 2φ, sin 2φ, τr (rad), τc (rad), Δ, 0."""
    c = np.asarray(candidates, dtype=np.float64).reshape(-1, 6)
    K = len(c)
    Kp = -(-K // pad_to) * pad_to
    out = np.zeros((Kp, 8))
    out[:K, 0] = c[:, 0]
    out[:K, 1] = c[:, 1]
    out[:K, 2] = np.cos(2 * c[:, 2])
    out[:K, 3] = np.sin(2 * c[:, 2])
    out[:K, 4] = c[:, 3] * MRAD
    out[:K, 5] = c[:, 4] * MRAD
    out[:K, 6] = c[:, 5]
    if Kp > K:
        out[K:] = out[K - 1]
    return out


def _device_bytes(values: Iterable[Any], cp: Any) -> int:
    """Bytes of the distinct device arrays among ``values`` (arrays or tuples of them):
    geometry rows shared by several windows count once."""
    arrays = {id(a): a for v in values for a in (v if isinstance(v, tuple) else (v,))
              if isinstance(a, cp.ndarray)}
    return sum(int(a.nbytes) for a in arrays.values())


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


class CUDAEngine(ArrayEngine):
    name = "cuda"

    def __init__(
        self, dataset: Dataset4D, staging_budget_MiB: float = 256, eval_group: int = 4,
        **options: Any,
    ) -> None:
        import cupy as cp

        self.cp = cp
        self.eval_group = int(eval_group)
        if self.eval_group not in ck.EVAL_GROUPS:
            raise ValueError(f"eval_group must be one of {ck.EVAL_GROUPS}")
        self._buffers: dict[tuple[int, int], Any] = {}  # reusable G buffers by shape
        self._geometry: dict[tuple[float, bool], tuple[Any, Any, Any]] = {}
        self._closing = False
        self.stats: dict[str, float] = {}
        self.close_breakdown: dict[str, float] = {}
        self._pool_baseline = self._pool_bytes()
        ck.module()  # compile (or load from CuPy's cache) before any timing-sensitive call
        options.setdefault("chunk_elements", 1 << 24)  # generic (fallback) path only
        self.count_dtype = np.dtype(dataset.counts.dtype)
        try:
            super().__init__(dataset, cp, real_dtype=np.float32,
                             staging_budget_MiB=staging_budget_MiB, **options)
        except cp.cuda.memory.OutOfMemoryError as exc:
            self._bf_counts = None
            self._free_pool()
            need = (self.bf.count * int(np.prod(dataset.counts.shape[:2]))
                    * self.count_dtype.itemsize)
            raise DeviceMemoryError(
                self._oom_message("uploading the BF counts", need, exc)) from None
        self._k_px = cp.asarray(self.bf.k_det / self.edge_width)
        self._anchors = ck.recurrence_anchors(self.bf.rows, self.bf.cols)
        self._column_step = ck.column_step(self.bf.k_det, self.bf.rows, self.bf.cols)
        self._geo = ck.geo_args(self.k_alpha, self.edge_width, self.wavelength)
        self._pilam = np.float64(math.pi * self.wavelength)

    # -- memory ------------------------------------------------------------------------
    def _pool_bytes(self) -> dict[str, int]:
        pool = self.cp.get_default_memory_pool()
        return {"used_bytes": int(pool.used_bytes()), "total_bytes": int(pool.total_bytes())}

    def _oom_message(self, what: str, need: int, exc: Exception) -> str:
        free, total = self.cp.cuda.runtime.memGetInfo()
        return (
            f"the GPU ran out of memory while {what}: about {need / 2**30:.2f} GiB needed, "
            f"{free / 2**30:.2f} of {total / 2**30:.2f} GiB free on the device ({exc}). "
            f"Options: a smaller staging budget (Session(..., staging_budget_MiB=...), now "
            f"{self.staging_bytes / 2**20:.0f} MiB), a smaller scan window "
            "(livessb.load(..., scan_region=...)), cropping the detector to the BF disk "
            "(crop_to_bf), or device='cpu'. The session is still usable.")

    @contextlib.contextmanager
    def _oom_guard(self, what: str, need: int) -> Iterator[None]:
        try:
            yield
        except self.cp.cuda.memory.OutOfMemoryError as exc:
            msg = self._oom_message(what, need, exc)
            self.cp.get_default_memory_pool().free_all_blocks()
            raise DeviceMemoryError(msg) from None

    # -- resident data -------------------------------------------------------------------
    def _upload_bf_counts(self, counts: Any) -> Any:
        """BF pixels of every pattern as (B, Rr, Rc) in the counts' native dtype."""
        cp = self.cp
        Rr, Rc = counts.shape[:2]
        B = self.bf.count
        P = Rr * Rc
        out = cp.empty((B, Rr, Rc), dtype=counts.dtype)
        dev = device_array_of(counts)
        if dev is not None:  # gather on the device, a slab of scan rows at a time
            kr, kc = counts.shape[2:]
            idx = cp.asarray((self.bf.rows * kc + self.bf.cols).astype(np.int32))
            flat = cp.ascontiguousarray(dev).reshape(P, kr * kc)
            kern = ck.kernel("gather_bf", counts.dtype)
            rows_per = max(1, (1 << 22) // max(1, Rc))
            for r0 in range(0, Rr, rows_per):
                npos = min(rows_per, Rr - r0) * Rc
                kern((-(-npos // ck.GATHER_TILE), -(-B // ck.GATHER_TILE)), (256,),
                     (flat, np.int64(npos), np.int64(r0 * Rc), np.int32(kr * kc), idx,
                      np.int32(B), np.int64(P), out))
            return out
        rows, cols = self.bf.rows, self.bf.cols
        for r in range(Rr):  # host counts (memmaps too): one scan row at a time
            row = np.ascontiguousarray(np.asarray(counts[r])[:, rows, cols].T)  # (B, Rc)
            out[:, r, :] = cp.asarray(row)
        return out

    def bf_center_of_mass(self) -> np.ndarray:
        self._check_open()
        cp = self.cp
        B, Rr, Rc = self._bf_counts.shape
        P = Rr * Rc
        out = cp.empty((P, 2), dtype=cp.float64)
        ck.kernel("bf_com", self.count_dtype)(
            (-(-P // 256),), (256,), (self._bf_counts, np.int32(B), np.int64(P), self._k_px, out))
        return cp.asnumpy(out).reshape(Rr, Rc, 2)

    # -- preparation -------------------------------------------------------------------------
    def _take_buffer(self, shape: tuple[int, int]) -> Any:
        buf = self._buffers.pop(shape, None)
        if buf is None:
            buf = self.cp.empty(shape, dtype=self.cp.complex64)
        return buf

    def prepare(self, bounds: Bounds | None = None) -> PreparedSpectra:
        self._check_open()
        Rr, Rc = self.dataset_shape[:2]
        b0, b1, b2, b3 = (0, Rr, 0, Rc) if bounds is None else (int(x) for x in bounds)
        b: Bounds = (b0, b1, b2, b3)
        h, w = b1 - b0, b3 - b2
        shape = (fft_friendly_size(h), fft_friendly_size(w))
        Nr, Nc = shape
        Hc = Nc // 2 + 1
        n_bf = self.bf.count
        M = Nr * Hc
        need = n_bf * M * 8
        t0 = time.perf_counter()
        with self._oom_guard(f"preparing the spectra of region {b}", need + self.staging_bytes):
            spectra = self._prepare(b, shape, h, w, Nr, Nc, Hc, n_bf, M)
        self._spectra.append(spectra)
        self._tick("prepare", t0)
        return spectra

    def _prepare(self, b: Bounds, shape: tuple[int, int], h: int, w: int, Nr: int, Nc: int,
                 Hc: int, n_bf: int, M: int) -> PreparedSpectra:
        cp = self.cp
        from cupy.cuda import cufft

        G = self._take_buffer((n_bf, M))
        try:
            bf = self._bf_counts
            mean = cp.empty(n_bf, dtype=cp.float64)
            ck.kernel("window_mean", self.count_dtype)(
                (n_bf,), (256,), (bf, np.int32(bf.shape[1]), np.int32(bf.shape[2]),
                                  np.int32(b[0]), np.int32(b[2]), np.int32(h), np.int32(w), mean))
            per_pixel = Nr * Nc * 4 + M * 8 * 2  # staging in, FFT out (+ its copy)
            chunk = int(max(1, min(n_bf, self.staging_bytes // per_pixel, MAX_GRID_Z)))
            stage = cp.zeros((chunk, Nr, Nc), dtype=cp.float32)
            stage_k = ck.kernel("stage_window", self.count_dtype)
            plan = _fft_plan(stage, "R2C")  # one plan per shape: the last chunk is padded
            for s in range(0, n_bf, chunk):
                n = min(chunk, n_bf - s)
                stage_k((-(-Nc // ck.NT), Nr, n), (ck.NT,),
                        (bf, np.int32(bf.shape[1]), np.int32(bf.shape[2]), np.int32(s),
                         np.int32(b[0]), np.int32(b[2]), np.int32(h), np.int32(w),
                         np.int32(Nr), np.int32(Nc), mean, stage))
                if n == chunk:  # straight into G's rows: no temporary spectrum, no copy
                    out = G[s:s + n].reshape(n, Nr, Hc)
                    plan.check_output_array(stage, out)
                    plan.fft(stage, out, cufft.CUFFT_FORWARD)
                else:  # the padded last chunk: through a temporary
                    with plan:
                        spec = cp.fft.rfft2(stage)
                    G[s:s + n] = spec[:n].reshape(n, M)
                    del spec
            del stage
            # DC of each pixel: the window sum plus the padding's mean pattern.
            G[:, 0] = (mean * (Nr * Nc)).astype(cp.float32)
        except BaseException:
            del G
            raise
        nu_r = np.fft.fftfreq(Nr, self.step[0])
        nu_c = np.fft.rfftfreq(Nc, self.step[1])
        dc = float(cp.asnumpy(mean).mean() * (Nr * Nc))
        spectra = PreparedSpectra(
            shape=shape, bounds=b, n_bf=n_bf, G=G, nu_r=None, nu_c=None,
            weights=None, dc=dc)
        spectra.extra = {"nu_r": cp.asarray(nu_r), "nu_c": cp.asarray(nu_c), "M": M}
        return spectra

    def set_rotation(self, spectra: PreparedSpectra, theta: float, transpose: bool) -> None:
        self._check_open()
        if spectra.rotation == (theta, transpose):
            return
        t0 = time.perf_counter()
        ex = spectra.extra
        ex["k64"], ex["px"], ex["dk"] = self._geometry_at(theta, transpose)
        ex.pop("fine_masks", None)  # the reconstruction grid's masks belong to the old θ
        spectra.k = ex["k64"]
        spectra.grids = []
        # The fit returns to rotations it has visited (branch θ, its mirror θ+π): their
        # energies are kept per window, computed once.
        seen = ex.setdefault("energies", {})
        if (theta, transpose) not in seen:
            seen[theta, transpose] = self._energy(spectra)
        spectra.energy, ex["pairs"] = seen[theta, transpose]
        spectra.rotation = (theta, transpose)
        self._tick("set_rotation", t0)

    def _geometry_at(self, theta: float, transpose: bool) -> tuple[Any, Any, Any]:
        """Device geometry rows (k64, px, dk) of one rotation, kept for the rotations in
        use (regions reuse the full field's; geometry does not depend on the window)."""
        key = (theta, transpose)
        if key not in self._geometry:
            if len(self._geometry) >= GEOMETRY_CACHE:
                self._geometry.pop(next(iter(self._geometry)))
            k, px, dk = self._pixel_geometry([theta], transpose)
            cp = self.cp
            self._geometry[key] = (cp.asarray(k[0]), cp.asarray(px[0]), cp.asarray(dk[0]))
        return self._geometry[key]

    def _energy(self, spectra: PreparedSpectra) -> tuple[float, int]:
        """Sideband energy and in-trotter pair count at the spectra's new geometry (the
        pixel loop split as in scoring: small windows have few frequency blocks)."""
        cp = self.cp
        ex = spectra.extra
        Nr, Nc = spectra.shape
        M = ex["M"]
        nblk = -(-M // ck.NT)
        per, nsplit = self._split(spectra)
        part = cp.empty((nsplit, nblk), dtype=cp.float64)
        pairs = cp.empty((nsplit, nblk), dtype=cp.float64)
        ck.module().get_function("energy_kernel")(
            (nblk, nsplit), (ck.NT,),
            (spectra.G, np.int32(spectra.n_bf), np.int32(M), np.int32(Nr), np.int32(Nc),
             ex["nu_r"], ex["nu_c"], ex["k64"], ex["px"], *self._geo, part, pairs,
             np.int32(per)))
        return (float(np.sum(cp.asnumpy(part).ravel())),
                int(np.sum(cp.asnumpy(pairs).ravel())))

    def _pixel_geometry(
        self, thetas: Any, transpose: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Scan-frame BF frequencies (R, B, 2) float64; the kernels' per-pixel rows
        (k_r, k_c, aperture, anchor) as float32 (R, B, 4), one 16-byte load per pixel;
        and the scan-frame step of one detector column (R, 2) float64 (vp_eval's
        recurrences advance by it from pixel to pixel, re-anchoring where anchor ≠ 0)."""
        k = np.stack([scan_frame_frequencies(self.bf.k_det, t, transpose) for t in thetas])
        px = np.zeros((*k.shape[:2], 4), dtype=np.float32)
        px[..., :2] = k
        px[..., 2] = aperture(k[..., 0], k[..., 1], self.k_alpha, self.edge_width, np)
        px[..., 3] = self._anchors
        dk = np.stack([scan_frame_frequencies(self._column_step, t, transpose)[0] for t in thetas])
        return np.ascontiguousarray(k), px, dk

    def evaluate_rotations(
        self, spectra: PreparedSpectra, thetas: np.ndarray, transpose: bool,
        candidate: np.ndarray, names: tuple[str, ...] = JOINT,
    ) -> np.ndarray:
        """VP loss of one six-parameter vector at each rotation, energies included, in one
        launch: the same sums as set_rotation + evaluate per θ (bit for bit where those do
        not split the pixel loop, i.e. windows of ≥ 512 frequency blocks; here the rotations
        fill the device instead). The spectra's own rotation is left as it was. Opted-in
        coefficients (``names`` other than the six) take the per-θ generic path."""
        if names != JOINT:
            return ArrayEngine.evaluate_rotations(self, spectra, thetas, transpose, candidate,
                                                  names)
        t0 = time.perf_counter()
        self._check_open()
        cp = self.cp
        thetas = np.asarray(thetas, dtype=np.float64).ravel()
        cand = np.asarray(candidate, dtype=np.float64).reshape(1, 6)
        R, M = len(thetas), spectra.extra["M"]
        if R == 0:
            return np.empty(0)
        k, px, dk = self._pixel_geometry(thetas, transpose)
        nblk = -(-M // ck.NT)
        part = cp.empty((R, nblk), dtype=cp.float64)
        energy = cp.empty((R, nblk), dtype=cp.float64)
        Nr, Nc = spectra.shape
        ex = spectra.extra
        ck.module().get_function(ck.eval_kernel_name(1, rotations=True))(
            (R, nblk, 1), (ck.NT,),
            (spectra.G, np.int32(spectra.n_bf), np.int32(M), np.int32(Nr), np.int32(Nc),
             ex["nu_r"], ex["nu_c"], cp.asarray(k), cp.asarray(px),
             cp.asarray(_candidate_table(cand)), *self._geo, self._pilam, part,
             np.int32(spectra.n_bf), part, energy, cp.asarray(dk)))
        sums = cp.asnumpy(part).sum(axis=1)
        energies = np.array([float(np.sum(row)) for row in cp.asnumpy(energy)])
        self.evaluations += R
        self._tick("evaluate_rotations", t0, R)
        return 1.0 - sums / energies

    def _support_masks(
        self, spectra: PreparedSpectra, nu_r: Any, nu_c: Any, M: int, H: int
    ) -> tuple[Any, int]:
        """Per-warp masks of the pixels that may be in the trotter of some frequency of
        the warp, for the (rows, H) grid at the current rotation: (uint32 (rows·tiles·4),
        tiles per row)."""
        cp = self.cp
        nblk = -(-M // ck.NT)
        tiles = -(-spectra.n_bf // ck.BT)
        with self._oom_guard("building the support masks", nblk * ck.NT // 32 * tiles * 16):
            masks = cp.empty(nblk * ck.NT // 32 * tiles * 4, dtype=cp.uint32)
        ck.module().get_function("support_mask")(
            (nblk,), (ck.NT,),
            (np.int32(spectra.n_bf), np.int32(M), np.int32(H), nu_r, nu_c,
             spectra.extra["px"], self._geo[0], self._geo[1], masks))
        return masks, tiles

    # -- scoring -------------------------------------------------------------------------------
    def _split(self, spectra: PreparedSpectra, min_blocks: int = 0) -> tuple[int, int]:
        """(pixels per split, splits) of the b loop: small windows split the BF pixels
        over blocks (then a finish kernel adds the splits in order). Depends on the
        window only (scoring, derivatives and energy add in the same order), unless a
        launch of few candidates asks for ``min_blocks`` frequency blocks × splits."""
        nblk = -(-spectra.extra["M"] // ck.NT)
        B = spectra.n_bf
        if nblk >= 512:
            if nblk >= min_blocks:
                return B, 1
            want = math.ceil(min_blocks / nblk)
        else:
            want = min(16, math.ceil(2048 / nblk))
        per = math.ceil(math.ceil(B / want) / ck.BT) * ck.BT
        return per, math.ceil(B / per)

    def _launch_args(self, spectra: PreparedSpectra) -> tuple[Any, ...]:
        ex = spectra.extra
        Nr, Nc = spectra.shape
        return (spectra.G, np.int32(spectra.n_bf), np.int32(ex["M"]), np.int32(Nr), np.int32(Nc),
                ex["nu_r"], ex["nu_c"], ex["k64"], ex["px"])

    def _tick(self, key: str, t0: float, n: int = 1) -> None:
        st = self.stats
        st[key + "_s"] = st.get(key + "_s", 0.0) + time.perf_counter() - t0
        st[key + "_calls"] = st.get(key + "_calls", 0) + 1
        st[key + "_candidates"] = st.get(key + "_candidates", 0) + n

    def evaluate(
        self, spectra: PreparedSpectra, candidates: np.ndarray, objective: str = "vp",
        names: tuple[str, ...] = JOINT,
    ) -> np.ndarray:
        t0 = time.perf_counter()
        if names != JOINT:  # opted-in coefficients leave the kernels: generic CuPy code
            out = self._generic(spectra, lambda: ArrayEngine.evaluate(
                self, spectra, candidates, objective, names))
        else:
            out = self._evaluate(spectra, candidates, objective)
        self._tick("evaluate", t0, len(out))
        return out

    def _evaluate(
        self, spectra: PreparedSpectra, candidates: np.ndarray, objective: str = "vp"
    ) -> np.ndarray:
        if objective != "vp":
            return self._generic(spectra, lambda: ArrayEngine.evaluate(
                self, spectra, candidates, objective))
        self._check_open()
        self._require_rotation(spectra)
        cand = np.asarray(candidates, dtype=np.float64).reshape(-1, 6)
        K = len(cand)
        if K == 0:
            return np.empty(0)
        sums = self.loss_sums(spectra, cand)
        self.evaluations += K
        return 1.0 - sums / spectra.energy

    def loss_sums(self, spectra: PreparedSpectra, cand: np.ndarray) -> np.ndarray:
        """Σ_ν w |N|²/D for each candidate (host sums over block partials).

        Candidates go eval_group to a thread; a lone leftover (a batch of 25 in groups of
        4) gets its own launch of one candidate per thread, split over the pixels to fill
        the device, instead of three padded copies of itself."""
        K = len(cand)
        kc = self.eval_group
        while kc > 1 and kc >= 2 * K:
            kc //= 2
        if kc > 1 and K > kc and K % kc == 1:
            return np.concatenate([
                self._loss_launch(spectra, cand[:-1], kc, self._split(spectra)),
                self._loss_launch(spectra, cand[-1:], 1,
                                  self._split(spectra, min_blocks=FILL_BLOCKS_EVAL))])
        return self._loss_launch(spectra, cand, kc, self._split(spectra))

    def _loss_launch(self, spectra: PreparedSpectra, cand: np.ndarray, kc: int,
                     split: tuple[int, int]) -> np.ndarray:
        cp = self.cp
        K = len(cand)
        table = _candidate_table(cand, kc)
        Kp = len(table)
        M = spectra.extra["M"]
        nblk = -(-M // ck.NT)
        part = cp.empty((Kp, nblk), dtype=cp.float64)
        per, nsplit = split
        raw = cp.empty((Kp, nsplit, 3, M) if nsplit > 1 else 1, dtype=cp.float64)
        ck.module().get_function(ck.eval_kernel_name(kc))(
            (Kp // kc, nblk, nsplit), (ck.NT,),
            (*self._launch_args(spectra), cp.asarray(table), *self._geo, self._pilam, part,
             np.int32(per), raw, raw, spectra.extra["dk"]))  # (energy output unused here)
        if nsplit > 1:
            ck.module().get_function("vp_eval_finish")(
                (Kp, nblk), (ck.NT,), (raw, np.int32(nsplit), np.int32(M),
                                      np.int32(spectra.shape[1]), part))
        host = cp.asnumpy(part)
        return host.sum(axis=1)[:K]

    def derivatives(
        self, spectra: PreparedSpectra, candidates: np.ndarray,
        names: tuple[str, ...] = JOINT,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        t0 = time.perf_counter()
        if names != JOINT:
            out = self._generic(spectra, lambda: ArrayEngine.derivatives(
                self, spectra, candidates, names))
        else:
            out = self._derivatives(spectra, candidates)
        self._tick("derivatives", t0, len(out[0]))
        return out

    def _derivatives(
        self, spectra: PreparedSpectra, candidates: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self._check_open()
        self._require_rotation(spectra)
        cp = self.cp
        cand = np.asarray(candidates, dtype=np.float64).reshape(-1, 6)
        K = len(cand)
        if K == 0:
            return np.empty(0), np.empty((0, 6)), np.empty((0, 6, 6))
        M = spectra.extra["M"]
        nblk = -(-M // ck.NT)
        part = cp.empty((K, ck.NQ, nblk), dtype=cp.float64)
        fn = ck.module().get_function("vp_derivs")
        smem = ck.NA * ck.NT * 8
        fin = ck.module().get_function("vp_derivs_finish")
        for f in (fn, fin):
            if f.max_dynamic_shared_size_bytes < smem:
                f.max_dynamic_shared_size_bytes = smem
        # One candidate alone (a Newton start refined last) fills the device only split.
        per, nsplit = self._split(spectra, min_blocks=FILL_BLOCKS_DERIV // K)
        table = cp.asarray(_candidate_table(cand))
        raw = cp.empty((K, nsplit, 3 + ck.NA, M) if nsplit > 1 else 1, dtype=cp.float64)
        fn((K, nblk, nsplit), (ck.NT,),
           (*self._launch_args(spectra), table, *self._geo, self._pilam, part, np.int32(per),
            raw), shared_mem=smem)
        if nsplit > 1:
            ex = spectra.extra
            fin((K, nblk), (ck.NT,),
                (raw, np.int32(nsplit), np.int32(M), np.int32(spectra.shape[1]), ex["nu_r"],
                 ex["nu_c"], table, self._geo[0], self._pilam, part), shared_mem=smem)
        s = cp.asnumpy(part).sum(axis=2)  # (K, 28)
        E = spectra.energy
        losses = 1.0 - s[:, 0] / E
        grads = -s[:, 1:7] / E
        hess = np.empty((K, 6, 6))
        for n, (i, j) in enumerate(PAIRS):
            hess[:, i, j] = hess[:, j, i] = -s[:, 7 + n] / E
        self.evaluations += K
        return losses, grads, hess

    # -- reconstruction --------------------------------------------------------------------------
    def reconstruct(
        self, spectra: PreparedSpectra, params: dict[str, float], upsample: int = 1,
        method: str = "ssb",
    ) -> np.ndarray:
        t0 = time.perf_counter()
        out = self._reconstruct(spectra, params, upsample, method)
        self._tick("reconstruct", t0)
        return out

    def _reconstruct(
        self, spectra: PreparedSpectra, params: dict[str, float], upsample: int = 1,
        method: str = "ssb",
    ) -> np.ndarray:
        self._check_reconstruct(spectra, method)
        if has_higher_order(params):  # leaves the quadratic fast path: generic CuPy code
            return self._generic(spectra, lambda: ArrayEngine.reconstruct(
                self, spectra, params, upsample, method))
        cp = self.cp
        f = int(upsample)
        Nr, Nc = spectra.shape
        Fr, Fc = f * Nr, f * Nc
        Hf = Fc // 2 + 1
        ex = spectra.extra
        key = f"fine{f}"
        if key not in ex:
            nu_r, nu_c = np.fft.fftfreq(Fr, self.step[0] / f), np.fft.rfftfreq(Fc, self.step[1] / f)
            alias = (np.round(np.fft.fftfreq(Fr) * Fr).astype(np.int64) % Nr).astype(np.int32)
            ex[key] = (cp.asarray(nu_r), cp.asarray(nu_c), cp.asarray(alias))
        nu_r, nu_c, alias = ex[key]
        if ex.get("fine_masks", (None,))[0] != f:  # per rotation (set_rotation drops it)
            ex["fine_masks"] = (f, *self._support_masks(spectra, nu_r, nu_c, Fr * Hf, Hf))
        vec = np.array([[float(params.get(p, 0.0)) for p in (
            "C10", "C12", "phi12", "tilt_row_mrad", "tilt_col_mrad", "depth")]])
        MF = Fr * Hf
        with self._oom_guard(f"reconstructing on the {Fr}x{Fc} grid", MF * 8 * 3):
            O = cp.empty(MF, dtype=cp.complex64)
            ev = [cp.cuda.Event() for _ in range(3)]
            ev[0].record()
            ck.module().get_function("reconstruct_kernel")(
                (-(-MF // ck.NT),), (ck.NT,),
                (spectra.G, np.int32(spectra.n_bf), np.int32(ex["M"]), np.int32(Nr),
                 np.int32(Nc), np.int32(Fr), np.int32(Fc), nu_r, nu_c, alias, ex["k64"],
                 ex["px"], ex["fine_masks"][1], np.int32(ex["fine_masks"][2]),
                 cp.asarray(_candidate_table(vec)), *self._geo, self._pilam,
                 np.float32(RECON_EPS), np.int32(0 if method == "ssb" else 1), O))
            ev[1].record()
            image = self._object_spectrum_to_image(spectra, O, f).astype(np.complex64)
            ev[2].record()
            t0 = time.perf_counter()
            out = cp.asnumpy(image)
            st = self.stats
            st["reconstruct_kernel_s"] = st.get("reconstruct_kernel_s", 0.0) + (
                cp.cuda.get_elapsed_time(ev[0], ev[1]) / 1e3)
            st["reconstruct_ifft_s"] = st.get("reconstruct_ifft_s", 0.0) + (
                cp.cuda.get_elapsed_time(ev[1], ev[2]) / 1e3)
            st["reconstruct_download_s"] = st.get("reconstruct_download_s", 0.0) + (
                time.perf_counter() - t0)
        return out

    def _irfft2(self, H: Any, shape: tuple[int, int]) -> Any:
        """As ArrayEngine's, with a process-cached cuFFT plan."""
        with _fft_plan(H, "C2R", shape):
            return self.cp.fft.irfft2(H, s=shape)

    # -- generic (NumPy-semantics) fallback: non-VP objectives, higher-order aberrations ---------
    def _generic(self, spectra: PreparedSpectra, call: Any) -> Any:
        self._check_open()
        self._require_rotation(spectra)
        cp = self.cp
        ex = spectra.extra
        Nr, Nc = spectra.shape
        # float32 geometry (like the spectra): the generic path stores (B, M) amplitudes.
        nu_r, nu_c = (cp.asarray(a.astype(np.float32))
                      for a in _half_plane_grid(spectra.shape, self.step))
        saved = (spectra.nu_r, spectra.nu_c, spectra.weights, spectra.grids)
        from ..physics.geometry import half_plane_weights

        spectra.nu_r, spectra.nu_c = nu_r, nu_c
        spectra.weights = cp.asarray(np.broadcast_to(
            half_plane_weights(Nc), (Nr, Nc // 2 + 1)).ravel().astype(np.float32))
        grids = []
        for sl in self._chunks(spectra):
            k = ex["k64"][sl].astype(cp.float32)
            mask = trotter_support(k, nu_r, nu_c, self.k_alpha, cp)
            grids.append(overlap_grid(k, nu_r, nu_c, mask, self.wavelength, self.k_alpha,
                                      self.edge_width, cp))
        spectra.grids = grids
        try:
            return call()
        finally:
            spectra.nu_r, spectra.nu_c, spectra.weights, spectra.grids = saved

    # -- lifetime ---------------------------------------------------------------------------
    def release(self, spectra: PreparedSpectra) -> None:
        G = spectra.G
        if (G is not None and not self._closed and not self._closing
                and G.shape not in self._buffers):
            self._buffers[G.shape] = G  # reused by the next preparation of this shape
        super().release(spectra)
        spectra.extra = {}

    def memory_info(self) -> dict[str, Any]:
        counts = 0 if self._closed or self._bf_counts is None else int(self._bf_counts.nbytes)
        spectra = sum(int(s.G.nbytes) for s in self._spectra if s.G is not None)
        cached = sum(int(b.nbytes) for b in self._buffers.values())
        geometry = _device_bytes([*self._geometry.values(),
                                  *(v for s in self._spectra for v in s.extra.values())], self.cp)
        pool = self._pool_bytes()
        return {"live_bytes": counts + spectra + cached + geometry, "bf_counts_bytes": counts,
                "geometry_and_mask_bytes": geometry,
                "fft_plan_pool_bytes": plan_pool_bytes(),
                "spectra_bytes": spectra, "reusable_buffer_bytes": cached,
                "pool_used_bytes": pool["used_bytes"], "pool_total_bytes": pool["total_bytes"],
                "pool_baseline": self._pool_baseline}

    def close(self) -> None:
        if self._closed:
            return
        t0 = time.perf_counter()
        self._closing = True
        self._buffers.clear()
        self._geometry.clear()
        self._k_px = None
        super().close()
        self.close_breakdown["total_s"] = time.perf_counter() - t0

    def _free_pool(self) -> None:
        cp = self.cp
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
        self.close_breakdown.update(plan_pool_s=t1 - t0, free_all_blocks_s=t2 - t1,
                                    pinned_s=time.perf_counter() - t2,
                                    pinned_free_blocks=pinned_blocks)


__all__ = ["CUDAEngine", "_alias_map", "device_array_of"]

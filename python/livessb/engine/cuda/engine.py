"""CuPy engine: resident BF counts, float32 half-plane spectra and fused CUDA kernels.

Same protocol and semantics as the CPU engine (the NumPy reference is the reference):

* BF counts are gathered once into a ``(B, Rr, Rc)`` device array in the counts'
  native dtype (on the device when the dataset's counts already live there, see
  ``livessb.bench.device_data.DeviceDataset4D``).
* ``prepare`` stages windows of pixels (mean-subtracted, zero padded; Hann-weighted for
  "hann") within the staging budget, batched ``rfft2`` into a reused (B, M) buffer.
* Geometry is never stored per (b, ν): the kernels evaluate the trotter support (float64,
  the NumPy formula) and the aperture from k_b and ν on the fly. (alias_pixels="excluded"
  keeps a bit per pair and rotation, the pairs its walks leave out:
  prepare.alias_exclusion_table.)
* ``evaluate`` scores a (K, 6) batch, ``derivatives`` gives the exact loss, gradient and
  Hessian of a batch, each in one launch; ``reconstruct`` runs on the (f·Nr, f·Nc) grid
  in one launch plus one inverse FFT. The rest (other objectives, opted-in coefficients,
  higher-order reconstruction) runs the NumPy reference over CuPy, float32 geometry.
* Reductions have a fixed order (thread per ν, b ascending; fixed block trees; host
  sums over block partials), so the same inputs give the same bits on one device.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...dataset import Dataset4D
from ...params import JOINT, N_JOINT
from ...physics import objective as obj
from ...physics.aliases import alias_spacing, check_alias_pixels
from ...physics.apodisation import apodised_for, check_scan_window
from ...physics.frequencies import check_scan_frequencies
from ...physics.geometry import fft_friendly_size, nearest_bf_pixels
from ...physics.optics import has_higher_order
from ...results import Bounds
from ...xp import to_host
from .. import cuda_kernels as ck
from ..lifetime import Lifetime
from ..protocol import Detachable, Spectra
from ..records import DatasetGeometry, PreparedSpectra, ReferenceGeometry, same_pixels
from ..reference import Reference, check_method, cropped, evaluate_rotations_per_theta
from ..spikes import repair_spikes
from .derivs import derivative_launch, derivatives_from_partials
from .launch import (
    KernelGeo,
    VpEvalFinishArgs,
    Window,
    candidate_table,
    energy_args,
    eval_launches,
    freq_blocks,
    launch,
    padded_count,
    pixel_rows,
    pixel_split,
    recon_launches,
    vp_eval_args,
)
from .memory import DeviceMemory, memory_report, planned_irfft2, resident_bf_counts
from .memory import upload_bf_counts as gather_bf_counts
from .prepare import (
    alias_exclusion_table,
    pattern_centres_of_mass,
    reference_geometry,
    stage_spectra,
    window_dc,
    window_totals,
)
from .reconstruct import Reconstructor
from .records import CUDAPart, RotationGeometry
from .timing import timed

GEOMETRY_CACHE = 8  # rotations whose device geometry rows are kept

DeviceSpectra = PreparedSpectra[CUDAPart]


class CUDAEngine:
    """``engine.protocol.Engine`` on one CUDA device."""

    name = "cuda"
    geo: DatasetGeometry  # set by _bind (read there only once rotations are cached)

    def __init__(
        self, dataset: Dataset4D, staging_budget_MiB: float = 256, eval_group: int = 4,
        chunk_elements: int = 1 << 24,  # the reference (fallback) path only
        scan_frequencies: str = "effective", alias_pixels: str = "kept", scan_window: str = "none",
    ) -> None:
        self.scan_frequencies = check_scan_frequencies(scan_frequencies)
        self.alias_pixels = check_alias_pixels(alias_pixels)
        self.scan_window = check_scan_window(scan_window)
        import cupy as cp

        self.cp = cp
        self.eval_group = int(eval_group)
        if self.eval_group not in ck.EVAL_GROUPS:
            raise ValueError(f"eval_group must be one of {ck.EVAL_GROUPS}")
        self._geometry: dict[tuple[float, bool], RotationGeometry] = {}
        self._closing = False
        self.stats: dict[str, float] = {}
        self.close_breakdown: dict[str, float] = {}
        self.memory = DeviceMemory(cp, int(staging_budget_MiB * 2**20))
        ck.module()  # compile (or load from CuPy's cache) before any timing-sensitive call
        self._chunk_elements = chunk_elements
        self.evaluations = 0
        self._life = Lifetime(CUDAPart)
        self.models: list[Detachable] = self._life.models
        self.scan_memo = self._life.memo
        self._bf_counts: Any = None
        self._bind(dataset)

    def _bind(self, dataset: Dataset4D) -> None:
        """Hold ``dataset``'s BF counts and constants; a rebind writes into the counts buffer
        where it fits, and keeps the rotations' rows for the same BF pixel set."""
        cp = self.cp
        geo = DatasetGeometry.of(dataset)
        if self._geometry and not same_pixels(geo, self.geo):
            self._geometry.clear()
        self.count_dtype = np.dtype(dataset.counts.dtype)
        self.geo = geo
        spacing = alias_spacing(geo.step, geo.k_alpha, self.alias_pixels)
        self.reference = Reference(geo, cp, np.float32, self._chunk_elements, spacing,
                                   irfft2=functools.partial(planned_irfft2, cp))
        old, self._bf_counts = self._bf_counts, None
        fits = (old is not None and old.dtype == self.count_dtype
                and old.shape == (geo.bf.count, *geo.shape[:2]))
        out = old if fits else None
        del old  # one that does not fit goes back to the pool before the new one is taken
        self._bf_counts = resident_bf_counts(cp, self.memory, dataset.counts, geo.bf, out,
                                             self.close_breakdown)
        self.spikes_repaired = repair_spikes(cp, self._bf_counts, 0, geo.bf_means)
        bf = geo.bf
        self._k_px: Any = cp.asarray(bf.k_det / geo.edge_width)
        self._anchors = ck.recurrence_anchors(bf.rows, bf.cols)
        self._column_step = ck.column_step(bf.k_det, bf.rows, bf.cols)
        self._kgeo = KernelGeo.of(geo.k_alpha, geo.edge_width, geo.wavelength, spacing,
                                  cp.asarray, float(np.max(np.hypot(*bf.k_det.T))))
        ck.module(self._kgeo.aliased)  # the alias module compiled (or loaded) now, if needed
        self._recon = Reconstructor(cp, self.memory, self._kgeo, self.reference, self.stats,
                                    geo.step)

    def load_counts(self, dataset: Dataset4D) -> bool:
        """``engine.protocol``: the next scan's counts; pool, plans and buffers kept."""
        return self._life.load(dataset, self.geo.shape, self.release, self._bind)

    @property
    def closed(self) -> bool:
        return self._life.closed

    @property
    def n_bf(self) -> int:
        return int(self.geo.bf.count)

    def _window(self, sp: DeviceSpectra) -> Window:
        return Window.of(sp.G, sp.n_bf, sp.part.M, sp.shape, sp.part.nu_r, sp.part.nu_c)

    def _alias_table(self, sp: DeviceSpectra, g: RotationGeometry) -> Any:
        return alias_exclusion_table(self.cp, self.memory, sp.part, sp.n_bf, g, self._kgeo)

    def _at_rotation(self, sp: DeviceSpectra) -> tuple[Window, RotationGeometry]:
        g = sp.part.geometry
        assert g is not None  # require_rotation: set_rotation set it
        return self._window(sp), g

    # -- resident data -------------------------------------------------------------------
    def upload_bf_counts(self, counts: Any) -> Any:
        return gather_bf_counts(self.cp, counts, self.geo.bf)

    def resident_bf_counts(self) -> Any:
        self._life.check_open()
        return self._bf_counts

    def bf_center_of_mass(self) -> np.ndarray:
        self._life.check_open()
        return pattern_centres_of_mass(self.cp, self._bf_counts, self._k_px)

    # -- preparation ---------------------------------------------------------------------
    @timed("prepare")
    def prepare(self, bounds: Bounds | None = None, apodise: bool | None = None) -> DeviceSpectra:
        self._life.check_open()
        hann = apodised_for(self.scan_window, apodise)
        Rr, Rc = self.geo.shape[:2]
        b0, b1, b2, b3 = (0, Rr, 0, Rc) if bounds is None else (int(x) for x in bounds)
        b: Bounds = (b0, b1, b2, b3)
        h, w = b1 - b0, b3 - b2
        shape = (fft_friendly_size(h), fft_friendly_size(w))
        Nr, Nc = shape
        Hc = Nc // 2 + 1
        n_bf = self.geo.bf.count
        M = Nr * Hc
        need = n_bf * M * 8
        with self.memory.guard(f"preparing the spectra of region {b}",
                               need + self.memory.staging_bytes):
            spectra = stage_spectra(self.cp, self.memory, self._bf_counts, self.count_dtype,
                                    self.geo.step, b, shape, h, w, n_bf, M,
                                    self.scan_frequencies, hann)
        self._life.spectra.append(spectra)
        return spectra

    def set_rotation(self, spectra: Spectra, theta: float, transpose: bool) -> None:
        self._life.check_open()
        sp = self._life.own(spectra)
        if sp.rotation == (theta, transpose):
            return
        self._rotate(sp, theta, transpose)

    @timed("set_rotation")
    def _rotate(self, sp: DeviceSpectra, theta: float, transpose: bool) -> None:
        part = sp.part
        part.geometry = self._geometry_at(theta, transpose)
        part.fine_masks.clear()  # masks belong to the old θ
        part.lobe_masks = None
        sp.energy, part.pairs = self._kept_energy(sp, part.geometry, theta, transpose)
        sp.rotation = (theta, transpose)

    def _geometry_at(self, theta: float, transpose: bool) -> RotationGeometry:
        """Device geometry rows of one rotation, kept for the rotations in use (regions
        reuse the full field's; geometry does not depend on the window)."""
        key = (theta, transpose)
        if key not in self._geometry:
            if len(self._geometry) >= GEOMETRY_CACHE:
                self._geometry.pop(next(iter(self._geometry)))
            k, px, dk = pixel_rows(self.geo.bf, self.geo.k_alpha, self.geo.edge_width,
                                   self._anchors, self._column_step, [theta], transpose)
            cp = self.cp
            self._geometry[key] = RotationGeometry(cp.asarray(k[0]), cp.asarray(px[0]),
                                                   cp.asarray(dk[0]))
        return self._geometry[key]

    def _kept_energy(self, sp: DeviceSpectra, g: RotationGeometry, theta: float,
                     transpose: bool) -> tuple[float, int]:
        """The window's energy and pair count at (θ, transpose), whose geometry is ``g``:
        kept, or a visited θ ± π's (the same pairs: CUDAPart.energy_at), else computed
        once and kept."""
        known = sp.part.energy_at(theta, transpose)
        sp.part.energies[theta, transpose] = self._energy(sp, g) if known is None else known
        return sp.part.energies[theta, transpose]

    def _energy(self, sp: DeviceSpectra, g: RotationGeometry) -> tuple[float, int]:
        """Sideband energy and in-trotter pair count at the spectra's new geometry (the
        pixel loop split as in scoring: small windows have few frequency blocks)."""
        cp = self.cp
        M = sp.part.M
        nblk = freq_blocks(M)
        per, nsplit = pixel_split(M, sp.n_bf)
        size = nsplit * nblk
        mean = sp.part.pending_mean  # the window's dc rides along the first time
        extra = 0 if mean is None else sp.n_bf
        out = cp.empty(2 * size + extra, dtype=cp.float64)  # energy, pairs: one download
        w = self._window(sp)
        launch(self._kgeo.function("energy_kernel"), (nblk, nsplit), (ck.NT,),
               energy_args(w, g.k64, g.px, self._alias_table(sp, g), self._kgeo, out[:size],
                           out[size:2 * size], per))
        if mean is not None:
            out[2 * size:] = mean
        host = to_host(out, "energy")
        if mean is not None:
            sp.dc = window_dc(host[2 * size:], sp.shape)
            sp.pixel_totals = window_totals(host[2 * size:], sp.bounds)
            sp.part.pending_mean = None
        return float(np.sum(host[:size])), int(np.sum(host[size:2 * size]))

    # -- scoring -------------------------------------------------------------------------
    @timed("evaluate", count=len)
    def evaluate(
        self, spectra: Spectra, candidates: np.ndarray, objective: str = "vp",
        names: tuple[str, ...] = JOINT,
    ) -> np.ndarray:
        if names != JOINT or objective != "vp":  # leaves the kernels: the reference
            return self._reference_evaluate(spectra, candidates, objective, names)
        sp = self._life.live(spectra)
        cand = np.asarray(candidates, dtype=np.float64).reshape(-1, N_JOINT)
        K = len(cand)
        if K == 0:
            return np.empty(0)
        launches = eval_launches(K, self.eval_group)
        M, B = sp.part.M, sp.n_bf
        # Each launch's block partials in rows of one array (a batch of 25 is two launches):
        # one download, one wait, one lockstep round.
        padded = [padded_count(sl.stop - sl.start, kc) for sl, kc, _ in launches]
        starts = np.cumsum([0, *padded])
        part = self.cp.empty((int(starts[-1]), freq_blocks(M)), dtype=self.cp.float64)
        for (sl, kc, min_blocks), a, b in zip(launches, starts[:-1], starts[1:], strict=True):
            self._loss_launch(sp, cand[sl], kc, pixel_split(M, B, min_blocks), part[a:b])
        host = to_host(part, "evaluate")
        sums = np.concatenate([host[a:a + (sl.stop - sl.start)].sum(axis=1)
                               for a, (sl, _, _) in zip(starts[:-1], launches, strict=True)])
        self.evaluations += K
        return 1.0 - sums / sp.energy

    def _loss_launch(self, sp: DeviceSpectra, cand: np.ndarray, kc: int,
                     split: tuple[int, int], part: Any) -> None:
        """Σ_ν Σ_lobe w |N|²/D block partials into ``part`` (Kp, nblk) on the device, kc
        candidates to a thread (Kp: padded to whole groups; the host sums the blocks)."""
        cp = self.cp
        w, g = self._at_rotation(sp)
        table = candidate_table(cand, kc)
        Kp = len(table)
        M = sp.part.M
        nblk = freq_blocks(M)
        assert part.shape == (Kp, nblk) and part.flags.c_contiguous
        per, nsplit = split
        raw = cp.empty((Kp, nsplit, ck.NS, M) if nsplit > 1 else 1, dtype=cp.float64)
        launch(self._kgeo.function(ck.eval_kernel_name(kc)), (Kp // kc, nblk, nsplit),
               (ck.NT,), vp_eval_args(w, g.k64, g.px, self._alias_table(sp, g),
                                      cp.asarray(table), self._kgeo, part, per, raw, g.dk))
        if nsplit > 1:
            launch(ck.function("vp_eval_finish"), (Kp, nblk), (ck.NT,),
                   VpEvalFinishArgs(raw, np.int32(nsplit), np.int32(M), w.Nc, part))

    def evaluate_rotations(
        self, spectra: Spectra, thetas: np.ndarray, transpose: bool,
        candidate: np.ndarray, names: tuple[str, ...] = JOINT,
    ) -> np.ndarray:
        """VP loss of one six-parameter vector at each rotation in one launch, the lobes'
        pixel sets and energy held at θ₀ = thetas[R // 2] (``engine.protocol``): at θ₀
        the loss evaluate gives the vector scored in a group (the recurrent form; bit for
        bit on windows of ≥ 512 frequency blocks, which do not split the pixel loop). The
        spectra's rotation is left as it was. Opted-in coefficients take the per-θ
        reference path."""
        if names != JOINT:
            return evaluate_rotations_per_theta(self, spectra, thetas, transpose, candidate,
                                                names)
        self._life.check_open()
        sp = self._life.own(spectra)
        thetas = np.asarray(thetas, dtype=np.float64).ravel()
        cand = np.asarray(candidate, dtype=np.float64).reshape(1, N_JOINT)
        if len(thetas) == 0:
            return np.empty(0)
        return self._fused_rotations(sp, thetas, transpose, cand)

    @timed("evaluate_rotations", count=len)
    def _fused_rotations(self, sp: DeviceSpectra, thetas: np.ndarray, transpose: bool,
                         cand: np.ndarray) -> np.ndarray:
        cp = self.cp
        R, M = len(thetas), sp.part.M
        held = float(thetas[R // 2])
        g = self._geometry_at(held, transpose)
        group = ck.ROTATION_GROUP  # R padded with θ₀ (turns nothing) to whole groups
        Rp = -(-R // group) * group
        turn = np.tile([1.0, 0.0], (Rp, 1))
        turn[:R] = np.stack([np.cos(thetas - held), np.sin(thetas - held)], axis=1)
        energy, _ = self._kept_energy(sp, g, held, transpose)  # the held pairs'
        part = cp.empty((Rp, freq_blocks(M)), dtype=cp.float64)
        launch(self._kgeo.function(ck.eval_kernel_name(group, rotations=True)),
               (Rp // group, freq_blocks(M), 1), (ck.NT,),
               vp_eval_args(self._window(sp), g.k64, g.px, self._alias_table(sp, g),
                            cp.asarray(candidate_table(cand)), self._kgeo, part, sp.n_bf, part,
                            g.dk, cp.asarray(turn)))
        sums = to_host(part, "evaluate_rotations")[:R].sum(axis=1)
        self.evaluations += R
        losses: np.ndarray = 1.0 - sums / energy
        return losses

    @timed("derivatives", count=lambda out: len(out[0]))
    def derivatives(
        self, spectra: Spectra, candidates: np.ndarray, names: tuple[str, ...] = JOINT,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if names != JOINT:
            return self._reference_derivatives(spectra, candidates, names)
        sp = self._life.live(spectra)
        cand = np.asarray(candidates, dtype=np.float64).reshape(-1, N_JOINT)
        if len(cand) == 0:
            return np.empty(0), np.empty((0, N_JOINT)), np.empty((0, N_JOINT, N_JOINT))
        part = derivative_launch(self, sp, cand, None)
        return self._from_partials(to_host(part, "derivatives"), len(cand), sp)

    @timed("frequency_gradients")
    def misfit_terms(
        self, spectra: Spectra, candidate: np.ndarray, names: tuple[str, ...] = JOINT,
    ) -> obj.MisfitTerms:
        sp = self._life.live(spectra)
        if names != JOINT:
            self.evaluations += 1
            return self.reference.misfit_terms(sp, self._reference_geometry(sp), candidate,
                                               names)
        cp, M = self.cp, sp.part.M
        per_nu = cp.empty((2, ck.N_PER_NU, M), dtype=cp.float64)  # (lobe, term, ν)
        part = derivative_launch(self, sp, np.asarray(candidate, np.float64).reshape(1, -1),
                                 per_nu)
        # One download: the block partials and each ν's terms, the lobes added.
        host = to_host(cp.concatenate([part.ravel(), (per_nu[0] + per_nu[1]).ravel()]),
                       "frequency_gradients")
        _, _, hessian = self._from_partials(host[:part.size], 1, sp)
        terms = host[part.size:].reshape(ck.N_PER_NU, M)
        scaled = terms[1:] * (-1.0 / sp.energy)  # the gradient and the C10 curvature
        return obj.MisfitTerms(per_nu=scaled[:6], hessian=hessian[0], explained=terms[0],
                               curvature=scaled[6])

    def _from_partials(self, partials: np.ndarray, K: int, sp: DeviceSpectra,
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self.evaluations += K
        return derivatives_from_partials(partials, K, sp.energy, freq_blocks(sp.part.M))

    # -- reconstruction ------------------------------------------------------------------
    @timed("reconstruct")
    def reconstruct(
        self, spectra: Spectra, params: dict[str, float], upsample: int = 1,
        method: str = "ssb", resident: bool = False, bf_pixels: int | None = None,
        crop: Bounds | None = None,
    ) -> Any:
        sp = self._life.live(spectra)
        check_method(method)
        keep = nearest_bf_pixels(self.geo.bf, bf_pixels)
        if has_higher_order(params):  # leaves the quadratic fast path: the reference
            ref = self._reference_geometry(sp)
            image = self.reference.reconstruct(sp, ref, params, upsample, method, keep)
            image = cropped(image, crop)
            return image if resident else to_host(image, "reconstruct")
        image = self._reconstruct(sp, [params], int(upsample), method, resident, keep, crop)
        return image[0] if resident else image

    @timed("reconstruct_many", len)
    def reconstruct_many(self, spectra: Spectra, params: Sequence[dict[str, float]],
                         upsample: int = 1, method: str = "ssb") -> list[Any]:
        sp = self._life.live(spectra)
        check_method(method)
        if any(has_higher_order(p) for p in params):
            return [self.reconstruct(spectra, p, upsample, method, resident=True)
                    for p in params]
        images: list[Any] = []
        for at in recon_launches(len(params)):
            images += self._reconstruct(sp, list(params[at]), int(upsample), method, True)
        return images

    def _reconstruct(self, sp: DeviceSpectra, params: list[dict[str, float]], f: int,
                     method: str, resident: bool, keep: np.ndarray | None = None,
                     crop: Bounds | None = None) -> Any:
        w, g = self._at_rotation(sp)
        return self._recon.images(sp, w, g, params, f, method, resident, keep, crop)

    # -- the reference operations over CuPy: non-VP objectives, opted-in coefficients --
    def _reference_geometry(self, sp: DeviceSpectra) -> ReferenceGeometry:
        return reference_geometry(self.reference, sp, self._at_rotation(sp)[1])

    def _reference_evaluate(self, spectra: Spectra, candidates: np.ndarray, objective: str,
                            names: tuple[str, ...]) -> np.ndarray:
        sp = self._life.live(spectra)
        out = self.reference.evaluate(sp, self._reference_geometry(sp), candidates, objective,
                                      names)
        self.evaluations += len(candidates)
        return out

    def _reference_derivatives(self, spectra: Spectra, candidates: np.ndarray,
                               names: tuple[str, ...]
                               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        sp = self._life.live(spectra)
        out = self.reference.derivatives(sp, self._reference_geometry(sp), candidates, names)
        self.evaluations += len(candidates)
        return out

    # -- lifetime and diagnostics --------------------------------------------------------
    def release(self, spectra: Spectra) -> None:
        sp = self._life.own(spectra)
        G = sp.G
        if G is not None and not self.closed and not self._closing:
            self.memory.buffers.keep(G)  # reused by the next preparation of this shape
        self._life.forget(sp)
        sp.G = None
        sp.part = CUDAPart(None, None, sp.part.M)

    def memory_info(self) -> dict[str, Any]:
        counts = None if self.closed else self._bf_counts
        return memory_report(self.memory, counts, self._life.spectra,
                             [a for g in self._geometry.values() for a in g.arrays()])

    def live_spectra(self) -> tuple[Spectra, ...]:
        return tuple(self._life.spectra)

    def spectra_info(self, spectra: Spectra) -> dict[str, int]:
        sp = self._life.own(spectra)
        return {"n_bf": sp.n_bf, "half_plane": sp.part.M, "trotter_pairs": sp.part.pairs,
                "spectra_bytes": 0 if sp.G is None else int(sp.G.nbytes)}

    def stage_timings(self) -> dict[str, float]:
        return dict(self.stats)

    def close_timings(self) -> dict[str, float]:
        self.memory.wait_released()  # its figures are the release's too
        return dict(self.close_breakdown)

    def close(self) -> None:
        if self.closed:
            return
        t0 = time.perf_counter()
        self._closing = True
        self.memory.buffers.clear()
        self.memory.constants.clear()
        self._geometry.clear()
        self._k_px = None
        self._life.close(self.release)
        self._bf_counts = None
        self.memory.free_pools_soon(self.close_breakdown, t0)
        self.close_breakdown["total_s"] = time.perf_counter() - t0

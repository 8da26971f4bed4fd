"""NumPy/SciPy engine on the host (tests, CI, laptops), float64.

Composes the NumPy reference operations (``engine.reference``) with fused Numba
kernels over the trotter pairs only, which cover the six-parameter VP objective
and the quadratic reconstruction; the reference runs the rest and is what the
kernels are tested against (``kernels=False`` runs it for everything).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dataset import Dataset4D
from ..params import JOINT, N_JOINT, to_vector
from ..physics import objective as obj
from ..physics.geometry import fft_friendly_size, scan_frame_frequencies
from ..physics.optics import has_higher_order
from ..physics.overlap import PAIRS
from ..results import Bounds
from .lifetime import Lifetime
from .protocol import Detachable, Spectra
from .records import (
    DatasetGeometry,
    FinePairs,
    HostPart,
    LobeGroups,
    PreparedSpectra,
    TrotterPairs,
)
from .reference import (
    RECON_EPS,
    WIENER_EPS,
    Reference,
    bf_center_of_mass,
    check_method,
    evaluate_rotations_per_theta,
    host_bf_counts,
)

_PAIRS = np.array(PAIRS, dtype=np.int64)
ROTATION_CACHE_BYTES = 512 * 2**20  # keep the previous rotation's geometry up to this size

HostSpectra = PreparedSpectra[HostPart]


class CPUEngine:
    """``engine.protocol.Engine`` on the host."""

    name = "cpu"

    def __init__(
        self, dataset: Dataset4D, staging_budget_MiB: float = 256,
        chunk_elements: int = 1 << 18, kernels: bool = True,
    ) -> None:
        self.geo = DatasetGeometry.of(dataset)
        self.reference = Reference(self.geo, np, np.float64, chunk_elements)
        self.kernels = bool(kernels)
        self.staging_bytes = int(staging_budget_MiB * 2**20)
        self.evaluations = 0
        self._life = Lifetime(HostPart)
        self.models: list[Detachable] = self._life.models
        bf = dataset.bright_field
        # Detector frequency of every detector row/column (1/Å), for the phase tables.
        w = self.geo.edge_width
        self._row_off = (np.arange(dataset.detector_shape[0]) - bf.center_row) * w
        self._col_off = (np.arange(dataset.detector_shape[1]) - bf.center_col) * w
        self._bf_counts: np.ndarray | None = self.upload_bf_counts(dataset.counts)

    @property
    def closed(self) -> bool:
        return self._life.closed

    @property
    def n_bf(self) -> int:
        return int(self.geo.bf.count)

    # -- resident data -----------------------------------------------------------------
    def upload_bf_counts(self, counts: Any) -> np.ndarray:
        return host_bf_counts(counts, self.geo.bf)

    def _counts(self) -> np.ndarray:
        self._life.check_open()
        assert self._bf_counts is not None
        return self._bf_counts

    def resident_bf_counts(self) -> np.ndarray:
        return self._counts()

    def bf_center_of_mass(self) -> np.ndarray:
        return bf_center_of_mass(self._counts(), self.geo)

    # -- preparation -------------------------------------------------------------------
    def prepare(self, bounds: Bounds | None = None) -> HostSpectra:
        counts = self._counts()
        Rr, Rc = self.geo.shape[:2]
        b: Bounds = (0, Rr, 0, Rc) if bounds is None else (
            int(bounds[0]), int(bounds[1]), int(bounds[2]), int(bounds[3]))
        shape = (fft_friendly_size(b[1] - b[0]), fft_friendly_size(b[3] - b[2]))
        G = self.reference.spectra(counts[b[0]:b[1], b[2]:b[3]], shape, self.staging_bytes)
        spectra = PreparedSpectra(
            shape=shape, bounds=b, n_bf=self.geo.bf.count, G=G,
            dc=float(G[:, 0].real.mean()), part=HostPart(self.reference.half_plane(shape)))
        self._life.spectra.append(spectra)
        return spectra

    def set_rotation(self, spectra: Spectra, theta: float, transpose: bool) -> None:
        sp = self._life.own(spectra)
        if sp.rotation == (theta, transpose):
            return
        self._life.check_open()
        part = sp.part
        stashed = part.previous.pop((theta, transpose), None)
        state = _rotation_state(sp) if sp.rotation is not None else None
        part.previous = ({sp.rotation: state} if sp.rotation is not None and state is not None
                         and _state_bytes(state) <= ROTATION_CACHE_BYTES else {})
        if stashed:
            sp.energy, g_k, g_grids, part.pairs, part.groups, part.to_det, part.fine = stashed
            part.geometry.k, part.geometry.grids = g_k, g_grids
            sp.rotation = (theta, transpose)
            return
        sp.energy = self.reference.rotate(sp.G, sp.n_bf, part.geometry, theta, transpose)
        sp.rotation = (theta, transpose)
        part.fine = {}  # fine-grid packs belong to the previous rotation
        part.pairs = part.groups = part.to_det = None
        if self.kernels:
            g = part.geometry
            # Scoring packs each trotter lobe as its own "frequency" (same ν, same weight),
            # so the kernels' per-group sums are the objective's per-lobe sums.
            part.pairs = _pack_trotter_pairs(g.grids, g.k, self.geo.bf.rows, self.geo.bf.cols,
                                             sp.G, None, None, split_lobes=True)
            part.groups = LobeGroups(np.concatenate([g.nu_r, g.nu_r]),
                                     np.concatenate([g.nu_c, g.nu_c]),
                                     obj.lobe_weights(g.weights))
            part.to_det = np.linalg.inv(scan_frame_frequencies(np.eye(2), theta, transpose).T)

    # -- scoring -----------------------------------------------------------------------
    def evaluate(
        self, spectra: Spectra, candidates: np.ndarray, objective: str = "vp",
        names: tuple[str, ...] = JOINT,
    ) -> np.ndarray:
        sp = self._life.live(spectra)
        geometry = sp.part.geometry
        pairs, groups, to_det = sp.part.pairs, sp.part.groups, sp.part.to_det
        # The kernels cover the six-parameter VP model; the reference runs the rest.
        if (pairs is None or groups is None or to_det is None or objective != "vp"
                or names != JOINT):
            out = self.reference.evaluate(sp, geometry, candidates, objective, names)
            self.evaluations += len(candidates)
            return out
        vp_sums: Any = _kernels().vp_sums
        cand = np.ascontiguousarray(candidates, dtype=np.float64).reshape(-1, N_JOINT)
        N, D = vp_sums(*_kernel_args(pairs, groups, self.geo.wavelength), cand,
                       pairs.det_r, pairs.det_c, self._row_off, self._col_off, to_det)
        self.evaluations += len(cand)
        return np.array([obj.vp_loss(N[k], D[k], groups.weights, sp.energy)
                         for k in range(len(cand))])

    def evaluate_rotations(
        self, spectra: Spectra, thetas: np.ndarray, transpose: bool,
        candidate: np.ndarray, names: tuple[str, ...] = JOINT,
    ) -> np.ndarray:
        """VP loss of one parameter vector named ``names`` at each rotation θ: (R,). Here
        set_rotation + evaluate per θ, so the spectra end at the last θ; callers set the
        rotation they want afterwards."""
        return evaluate_rotations_per_theta(self, spectra, thetas, transpose, candidate, names)

    def derivatives(
        self, spectra: Spectra, candidates: np.ndarray, names: tuple[str, ...] = JOINT,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        sp = self._life.live(spectra)
        geometry, pairs, groups = sp.part.geometry, sp.part.pairs, sp.part.groups
        if pairs is None or groups is None or names != JOINT:
            out = self.reference.derivatives(sp, geometry, candidates, names)
            self.evaluations += len(candidates)
            return out
        vp_derivative_sums: Any = _kernels().vp_derivative_sums
        cand = np.ascontiguousarray(candidates, dtype=np.float64).reshape(-1, N_JOINT)
        K = len(cand)
        losses, grads = np.empty(K), np.empty((K, N_JOINT))
        hessians = np.empty((K, N_JOINT, N_JOINT))
        args = _kernel_args(pairs, groups, self.geo.wavelength)
        for k in range(K):
            N, D, dN, dD, d2N, d2D = vp_derivative_sums(*args, cand[k], _PAIRS)
            losses[k], grads[k], hessians[k] = obj.vp_loss_derivatives(
                N, D, dN, dD, d2N, d2D, groups.weights, sp.energy)
        self.evaluations += K
        return losses, grads, hessians

    # -- reconstruction ----------------------------------------------------------------
    def reconstruct(
        self, spectra: Spectra, params: dict[str, float], upsample: int = 1,
        method: str = "ssb",
    ) -> np.ndarray:
        sp = self._life.live(spectra)
        check_method(method)
        if not self.kernels or has_higher_order(params):
            out: np.ndarray = self.reference.reconstruct(sp, sp.part.geometry, params, upsample,
                                                         method)
            return out
        f = int(upsample)
        O = self.object_spectrum(sp, params, f, method)
        image: np.ndarray = self.reference.object_spectrum_to_image(sp, O, f)
        return image.astype(np.complex64)

    def object_spectrum(self, spectra: Spectra, params: dict[str, float], upsample: int,
                        method: str) -> np.ndarray:
        """O(ν) (complex128) on the f-times finer half plane by the Numba kernel (six joint
        parameters); the reference's ``ssb_spectrum``/Wiener spectrum is what it matches."""
        sp = self._life.live(spectra)
        part, f = sp.part, int(upsample)
        if f not in part.fine:  # geometry of the f-times finer grid, per rotation
            part.fine[f] = self._fine_pairs(sp, f)
        fine = part.fine[f]
        c = fine.pairs
        C, N, D = _kernels().reconstruction_sums(
            c.indptr, c.k_r, c.k_c, c.amp_m, c.amp_p, c.G, fine.nu_r, fine.nu_c,
            np.pi * self.geo.wavelength, to_vector(params, JOINT, default=0.0), RECON_EPS,
            c.det_r, c.det_c, self._row_off, self._col_off, part.to_det)
        out: np.ndarray = C / sp.n_bf if method == "ssb" else N / (D + WIENER_EPS * sp.n_bf)
        return out

    def _fine_pairs(self, sp: HostSpectra, f: int) -> FinePairs:
        """The f-times finer grid's pairs, packed a BF chunk at a time and merged by ν (the
        dense fine geometry is never held whole; the order is that of one pack)."""
        g = sp.part.geometry
        if f == 1:
            pack = _pack_trotter_pairs(g.grids, g.k, self.geo.bf.rows, self.geo.bf.cols, sp.G,
                                       None, None)
            return FinePairs(pack, g.grids[0].nu_r.ravel(), g.grids[0].nu_c.ravel())
        nu_r, nu_c, index, conj = self.reference.fine_frequencies(sp, f)
        packs, start = [], 0
        for grid in self.reference.fine_grid_chunks(g, nu_r, nu_c, sp.n_bf):
            n = int(grid.k_r.shape[0])
            sl = slice(start, start + n)
            packs.append(_pack_trotter_pairs([grid], g.k[sl], self.geo.bf.rows[sl],
                                             self.geo.bf.cols[sl], sp.G[sl], index, conj))
            start += n
        return FinePairs(_merge_packs(packs), nu_r, nu_c)

    # -- lifetime and diagnostics ------------------------------------------------------
    def release(self, spectra: Spectra) -> None:
        sp = self._life.own(spectra)
        self._life.forget(sp)
        sp.G = None
        part = sp.part
        part.geometry.k = None
        part.geometry.grids = []
        part.pairs = part.groups = part.to_det = None
        part.fine = {}
        part.previous = {}

    def memory_info(self) -> dict[str, Any]:
        arrays: list[Any] = [self._bf_counts] if not self.closed else []
        for s in self._life.spectra:
            g = s.part.geometry
            arrays += [s.G, g.nu_r, g.nu_c, g.weights]
            for grid in g.grids:
                arrays += [grid.amp_minus, grid.amp_plus, grid.minus_lobe]
        return {"live_bytes": int(sum(getattr(a, "nbytes", 0) for a in arrays))}

    def live_spectra(self) -> tuple[Spectra, ...]:
        return tuple(self._life.spectra)

    def spectra_info(self, spectra: Spectra) -> dict[str, int]:
        sp = self._life.own(spectra)
        pairs = sum(int(((g.amp_minus != 0) | (g.amp_plus != 0)).sum())
                    for g in sp.part.geometry.grids)
        return {"n_bf": sp.n_bf, "half_plane": 0 if sp.G is None else int(sp.G.shape[1]),
                "trotter_pairs": pairs, "spectra_bytes": 0 if sp.G is None else int(sp.G.nbytes)}

    def stage_timings(self) -> dict[str, float]:
        return {}  # the host engine does not time its stages

    def close_timings(self) -> dict[str, float]:
        return {}

    def close(self) -> None:
        if self.closed:
            return
        self._life.close(self.release)
        self._bf_counts = None


def _rotation_state(sp: HostSpectra) -> tuple[Any, ...]:
    part = sp.part
    return (sp.energy, part.geometry.k, part.geometry.grids, part.pairs, part.groups,
            part.to_det, part.fine)


def _state_bytes(state: tuple[Any, ...]) -> int:
    """Bytes of the arrays a rotation state holds (grids, packs, fine packs)."""
    seen: list[Any] = [state[1]]
    for g in state[2]:
        seen += list(vars(g).values())
    packs = [state[3]] + [f.pairs for f in state[6].values()]
    for p in packs:
        if p is not None:
            seen += list(vars(p).values())
    return int(sum(getattr(a, "nbytes", 0) for a in seen))


def _kernels() -> Any:
    # Imported on first use: compiling (or loading cached) Numba kernels takes seconds.
    from . import cpu_kernels

    return cpu_kernels


def _pack_trotter_pairs(
    grids: list[Any], k: np.ndarray, bf_rows: np.ndarray, bf_cols: np.ndarray, G: np.ndarray,
    alias_index: np.ndarray | None, alias_conj: np.ndarray | None, split_lobes: bool = False,
) -> TrotterPairs:
    """(b, ν) pairs inside a trotter, grouped by ν (CSR), with their geometry and G.

    On an upsampled grid ``alias_index``/``alias_conj`` say which coarse spectrum
    value (or its conjugate) each fine frequency reads. ``split_lobes``: 2M groups, the
    k-ν lobe's pairs of every ν first, then the k+ν lobe's (per-lobe objective sums).
    """
    amp_m = np.concatenate([g.amp_minus for g in grids], axis=0).T
    amp_p = np.concatenate([g.amp_plus for g in grids], axis=0).T
    inside = (amp_m != 0) | (amp_p != 0)
    if split_lobes:
        minus = np.concatenate([g.minus_lobe for g in grids], axis=0).T
        inside = np.concatenate([inside & minus, inside & ~minus])
    m_idx, b_idx = np.nonzero(inside)  # ν-major, then b ascending: the summation order
    indptr = np.concatenate([[0], np.cumsum(inside.sum(axis=1))]).astype(np.int64)
    if split_lobes:
        m_idx = m_idx % amp_m.shape[0]  # the spectrum column of each pair
    return TrotterPairs(
        indptr=indptr,
        k_r=np.ascontiguousarray(k[b_idx, 0]),
        k_c=np.ascontiguousarray(k[b_idx, 1]),
        amp_m=np.ascontiguousarray(amp_m[m_idx, b_idx]),
        amp_p=np.ascontiguousarray(amp_p[m_idx, b_idx]),
        G=_aliased_values(G, b_idx, m_idx, alias_index, alias_conj),
        det_r=bf_rows[b_idx].astype(np.int64),
        det_c=bf_cols[b_idx].astype(np.int64),
    )


def _merge_packs(packs: list[TrotterPairs]) -> TrotterPairs:
    """One ν-major pack from packs of consecutive BF chunks: per ν, chunk 0's pairs, then
    chunk 1's, … (b ascending, as one pack of all chunks would hold them)."""
    if len(packs) == 1:
        return packs[0]
    counts = np.stack([np.diff(p.indptr) for p in packs])  # (chunks, M)
    indptr = np.concatenate([[0], np.cumsum(counts.sum(axis=0))]).astype(np.int64)
    before = np.cumsum(counts, axis=0) - counts  # pairs of earlier chunks, per ν
    total = int(indptr[-1])
    names = ("k_r", "k_c", "amp_m", "amp_p", "G", "det_r", "det_c")
    out = {n: np.empty(total, dtype=getattr(packs[0], n).dtype) for n in names}
    M = counts.shape[1]
    for c, p in enumerate(packs):
        m_of = np.repeat(np.arange(M), counts[c])
        dest = indptr[m_of] + before[c, m_of] + (np.arange(m_of.size) - p.indptr[m_of])
        for n in names:
            out[n][dest] = getattr(p, n)
    return TrotterPairs(indptr=indptr, **out)


def _aliased_values(
    G: np.ndarray, b_idx: np.ndarray, m_idx: np.ndarray, index: np.ndarray | None,
    conj: np.ndarray | None,
) -> np.ndarray:
    if index is None or conj is None:
        return np.ascontiguousarray(G[b_idx, m_idx])
    vals = G[b_idx, index[m_idx]]
    return np.ascontiguousarray(np.where(conj[m_idx], vals.conj(), vals))


def _kernel_args(pairs: TrotterPairs, groups: LobeGroups,
                 wavelength: float) -> tuple[Any, ...]:
    return (pairs.indptr, pairs.k_r, pairs.k_c, pairs.amp_m, pairs.amp_p, pairs.G,
            groups.nu_r, groups.nu_c, np.pi * wavelength)

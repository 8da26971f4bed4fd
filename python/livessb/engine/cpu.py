"""NumPy/SciPy engine on the host (tests, CI, laptops), float64.

Scoring and derivatives run in fused Numba kernels over the trotter pairs
only; ``ArrayEngine``'s NumPy path is the reference they are tested against.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dataset import Dataset4D
from ..params import JOINT
from ..physics import objective as obj
from ..physics.geometry import scan_frame_frequencies
from ..physics.optics import has_higher_order
from ..physics.overlap import PAIRS
from .array_engine import RECON_EPS, ArrayEngine, PreparedSpectra

_PAIRS = np.array(PAIRS, dtype=np.int64)


class CPUEngine(ArrayEngine):
    name = "cpu"

    def __init__(self, dataset: Dataset4D, **options: Any) -> None:
        super().__init__(dataset, np, real_dtype=np.float64, **options)
        bf = dataset.bright_field
        # Detector frequency of every detector row/column (1/Å), for the phase tables.
        self._row_off = (np.arange(dataset.detector_shape[0]) - bf.center_row) * self.edge_width
        self._col_off = (np.arange(dataset.detector_shape[1]) - bf.center_col) * self.edge_width

    def set_rotation(self, spectra: PreparedSpectra, theta: float, transpose: bool) -> None:
        if spectra.rotation == (theta, transpose):
            return
        super().set_rotation(spectra, theta, transpose)
        spectra.extra.clear()  # fine-grid packs belong to the previous rotation
        spectra.extra["csr"] = _pack_trotter_pairs(
            spectra.grids, spectra.k, self.bf.rows, self.bf.cols, spectra.G, None, None)
        spectra.extra["to_det"] = np.linalg.inv(
            scan_frame_frequencies(np.eye(2), theta, transpose).T)

    def evaluate(
        self, spectra: PreparedSpectra, candidates: np.ndarray, objective: str = "vp",
        names: tuple[str, ...] = JOINT,
    ) -> np.ndarray:
        if objective != "vp" or names != JOINT:  # the kernels cover the six-parameter model
            return super().evaluate(spectra, candidates, objective, names)
        self._check_open()
        self._require_rotation(spectra)
        vp_sums: Any = _kernels().vp_sums
        cand = np.ascontiguousarray(candidates, dtype=np.float64).reshape(-1, 6)
        c = spectra.extra["csr"]
        N, D = vp_sums(*_kernel_args(spectra, self.wavelength), cand, c["det_r"], c["det_c"],
                       self._row_off, self._col_off, spectra.extra["to_det"])
        self.evaluations += len(cand)
        return np.array([obj.vp_loss(N[k], D[k], spectra.weights, spectra.energy)
                         for k in range(len(cand))])

    def reconstruct(
        self, spectra: PreparedSpectra, params: dict[str, float], upsample: int = 1,
        method: str = "ssb",
    ) -> np.ndarray:
        self._check_reconstruct(spectra, method)
        if has_higher_order(params):
            return super().reconstruct(spectra, params, upsample, method)
        f = int(upsample)
        key = f"fine{f}"
        if key not in spectra.extra:  # geometry of the f-times finer grid, per rotation
            grids, index, conj = self._fine_grids(spectra, f)
            pack = _pack_trotter_pairs(
                grids, spectra.k, self.bf.rows, self.bf.cols, spectra.G, index, conj)
            # The fine grid's frequencies, kept with its pairs (every grid block shares them).
            pack["nu_r"], pack["nu_c"] = grids[0].nu_r.ravel(), grids[0].nu_c.ravel()
            spectra.extra[key] = pack
        c = spectra.extra[key]
        vec = np.array([float(params.get(p, 0.0)) for p in JOINT])
        C, N, D = _kernels().reconstruction_sums(
            c["indptr"], c["k_r"], c["k_c"], c["amp_m"], c["amp_p"], c["G"], c["nu_r"], c["nu_c"],
            np.pi * self.wavelength, vec, RECON_EPS)
        O = C / spectra.n_bf if method == "ssb" else N / (D + 1e-3 * spectra.n_bf)
        return self._object_spectrum_to_image(spectra, O, f).astype(np.complex64)

    def derivatives(
        self, spectra: PreparedSpectra, candidates: np.ndarray,
        names: tuple[str, ...] = JOINT,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if names != JOINT:
            return super().derivatives(spectra, candidates, names)
        self._check_open()
        self._require_rotation(spectra)
        vp_derivative_sums: Any = _kernels().vp_derivative_sums
        cand = np.ascontiguousarray(candidates, dtype=np.float64).reshape(-1, 6)
        K = len(cand)
        losses, grads, hessians = np.empty(K), np.empty((K, 6)), np.empty((K, 6, 6))
        args = _kernel_args(spectra, self.wavelength)
        for k in range(K):
            N, D, dN, dD, d2N, d2D = vp_derivative_sums(*args, cand[k], _PAIRS)
            losses[k], grads[k], hessians[k] = obj.vp_loss_derivatives(
                N, D, dN, dD, d2N, d2D, spectra.weights, spectra.energy)
        self.evaluations += K
        return losses, grads, hessians


def _kernels() -> Any:
    # Imported on first use: compiling (or loading cached) Numba kernels takes seconds.
    from . import cpu_kernels

    return cpu_kernels


def _pack_trotter_pairs(
    grids: list[Any], k: np.ndarray, bf_rows: np.ndarray, bf_cols: np.ndarray, G: np.ndarray,
    alias_index: np.ndarray | None, alias_conj: np.ndarray | None,
) -> dict[str, np.ndarray]:
    """(b, ν) pairs inside a trotter, grouped by ν (CSR), with their geometry and G.

    On an upsampled grid ``alias_index``/``alias_conj`` say which coarse spectrum
    value (or its conjugate) each fine frequency reads.
    """
    amp_m = np.concatenate([g.amp_minus for g in grids], axis=0).T
    amp_p = np.concatenate([g.amp_plus for g in grids], axis=0).T
    inside = (amp_m != 0) | (amp_p != 0)
    m_idx, b_idx = np.nonzero(inside)  # ν-major, then b ascending: the summation order
    indptr = np.concatenate([[0], np.cumsum(inside.sum(axis=1))]).astype(np.int64)
    return {
        "indptr": indptr,
        "k_r": np.ascontiguousarray(k[b_idx, 0]),
        "k_c": np.ascontiguousarray(k[b_idx, 1]),
        "amp_m": np.ascontiguousarray(amp_m[m_idx, b_idx]),
        "amp_p": np.ascontiguousarray(amp_p[m_idx, b_idx]),
        "G": _aliased_values(G, b_idx, m_idx, alias_index, alias_conj),
        "det_r": bf_rows[b_idx].astype(np.int64),
        "det_c": bf_cols[b_idx].astype(np.int64),
    }


def _aliased_values(
    G: np.ndarray, b_idx: np.ndarray, m_idx: np.ndarray, index: np.ndarray | None,
    conj: np.ndarray | None,
) -> np.ndarray:
    if index is None or conj is None:
        return np.ascontiguousarray(G[b_idx, m_idx])
    vals = G[b_idx, index[m_idx]]
    return np.ascontiguousarray(np.where(conj[m_idx], vals.conj(), vals))


def _kernel_args(spectra: PreparedSpectra, wavelength: float) -> tuple[Any, ...]:
    c = spectra.extra["csr"]
    return (c["indptr"], c["k_r"], c["k_c"], c["amp_m"], c["amp_p"], c["G"],
            spectra.nu_r, spectra.nu_c, np.pi * wavelength)

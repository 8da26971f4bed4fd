"""NumPy/SciPy engine on the host (tests, CI, laptops), float64.

Scoring and derivatives run in fused Numba kernels over the trotter pairs
only; ``ArrayEngine``'s NumPy path is the reference they are tested against.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dataset import Dataset4D
from ..physics import objective as obj
from ..physics.geometry import scan_frame_frequencies
from ..physics.overlap import PAIRS
from .array_engine import ArrayEngine, PreparedSpectra

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
        spectra.extra["csr"] = _pack_trotter_pairs(spectra, self.bf.rows, self.bf.cols)
        spectra.extra["to_det"] = np.linalg.inv(
            scan_frame_frequencies(np.eye(2), theta, transpose).T)

    def evaluate(
        self, spectra: PreparedSpectra, candidates: np.ndarray, objective: str = "vp"
    ) -> np.ndarray:
        if objective != "vp":
            return super().evaluate(spectra, candidates, objective)
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

    def derivatives(
        self, spectra: PreparedSpectra, candidates: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
    spectra: PreparedSpectra, bf_rows: np.ndarray, bf_cols: np.ndarray
) -> dict[str, np.ndarray]:
    """(b, ν) pairs inside a trotter, grouped by ν (CSR), with their geometry and G."""
    amp_m = np.concatenate([g.amp_minus for g in spectra.grids], axis=0).T
    amp_p = np.concatenate([g.amp_plus for g in spectra.grids], axis=0).T
    inside = (amp_m != 0) | (amp_p != 0)
    m_idx, b_idx = np.nonzero(inside)  # ν-major, then b ascending: the summation order
    indptr = np.concatenate([[0], np.cumsum(inside.sum(axis=1))]).astype(np.int64)
    return {
        "indptr": indptr,
        "k_r": np.ascontiguousarray(spectra.k[b_idx, 0]),
        "k_c": np.ascontiguousarray(spectra.k[b_idx, 1]),
        "amp_m": np.ascontiguousarray(amp_m[m_idx, b_idx]),
        "amp_p": np.ascontiguousarray(amp_p[m_idx, b_idx]),
        "G": np.ascontiguousarray(spectra.G[b_idx, m_idx]),
        "det_r": bf_rows[b_idx].astype(np.int64),
        "det_c": bf_cols[b_idx].astype(np.int64),
    }


def _kernel_args(spectra: PreparedSpectra, wavelength: float) -> tuple[Any, ...]:
    c = spectra.extra["csr"]
    return (c["indptr"], c["k_r"], c["k_c"], c["amp_m"], c["amp_p"], c["G"],
            spectra.nu_r, spectra.nu_c, np.pi * wavelength)

"""Engine written once over an array module (numpy or cupy).

The NumPy engine is this class as is; the CuPy engine subclasses it and
replaces the hot loops with fused kernels. Reductions run in a fixed order
(BF chunks in index order, candidates one after another), so the same inputs
give the same losses bit for bit on the same device.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..dataset import Dataset4D
from ..params import JOINT, from_vector
from ..physics import objective as obj
from ..physics.geometry import (
    BFPixels,
    bright_field_pixels,
    fft_friendly_size,
    half_plane_weights,
    scan_frame_frequencies,
    trotter_support,
)
from ..physics.optics import has_higher_order
from ..physics.overlap import (
    OverlapGrid,
    gamma,
    gamma_derivatives,
    gamma_general,
    gamma_general_derivatives,
    overlap_grid,
    pairs_of,
)
from ..results import Bounds
from .protocol import EngineClosedError

RECON_EPS = 1e-2  # floor of |Γ| in the SSB correction (Γ ~ 1 inside the trotters)


@dataclass(eq=False)  # identity: two windows with equal fields are still two buffers
class PreparedSpectra:
    """Half-plane spectra G_b(ν) of one scan window plus its rotation-dependent geometry."""

    shape: tuple[int, int]
    bounds: Bounds
    n_bf: int
    G: Any  # (B, M) complex, M = Nr·(Nc//2+1) flattened half plane
    nu_r: Any  # (M,)
    nu_c: Any  # (M,)
    weights: Any  # (M,) 1 or 2 per rfft column
    dc: float  # mean over BF pixels of G_b(0): the object's DC term
    k: Any = None  # (B, 2) scan-frame frequencies for the current rotation
    grids: list[OverlapGrid] = field(default_factory=list)
    energy: float = 0.0
    rotation: tuple[float, bool] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # engine-specific caches


class ArrayEngine:
    """Engine protocol over ``xp``; see ``engine.protocol.Engine``."""

    name = "array"

    def __init__(
        self,
        dataset: Dataset4D,
        xp: Any,
        real_dtype: Any = np.float64,
        staging_budget_MiB: float = 256,
        chunk_elements: int = 1 << 18,
    ) -> None:
        self.xp = xp
        self.real_dtype = real_dtype
        self.complex_dtype = np.result_type(real_dtype, np.complex64)
        self.staging_bytes = int(staging_budget_MiB * 2**20)
        self.chunk_elements = chunk_elements
        self.dataset_shape = dataset.counts.shape
        self.step = dataset.scan_step_A
        self.wavelength = dataset.wavelength_A
        self.k_alpha = dataset.k_alpha
        self.edge_width = dataset.detector_pixel_inv_A
        bf = dataset.bright_field
        self.bf: BFPixels = bright_field_pixels(
            dataset.detector_shape, (bf.center_row, bf.center_col),
            dataset.detector_pixel_inv_A, dataset.k_alpha)
        self.evaluations = 0
        self.models: list[Any] = []  # ThickSample models bound to this engine (the cycle)
        self._spectra: list[PreparedSpectra] = []
        self._bf_counts = self._upload_bf_counts(dataset.counts)
        self._closed = False

    # -- resident data -------------------------------------------------------
    def _upload_bf_counts(self, counts: Any) -> Any:
        """BF pixels of every pattern, (Rr, Rc, B) in the counts' dtype, read row by row."""
        rows, cols = self.bf.rows, self.bf.cols
        out = np.empty((*counts.shape[:2], rows.size), dtype=counts.dtype)
        for r in range(counts.shape[0]):
            out[r] = np.asarray(counts[r])[:, rows, cols]
        return self.xp.asarray(out)

    def bf_center_of_mass(self) -> np.ndarray:
        """COM of each pattern over the BF pixels, detector px from the BF centre: (Rr, Rc, 2)."""
        self._check_open()
        xp = self.xp
        k_px = xp.asarray(self.bf.k_det / self.edge_width)  # edge width = one detector pixel
        out = xp.empty((*self._bf_counts.shape[:2], 2))
        for r in range(self._bf_counts.shape[0]):
            row = self._bf_counts[r].astype(xp.float64)
            total = row.sum(axis=1, keepdims=True)
            out[r] = (row @ k_px) / xp.where(total > 0, total, 1.0)
        return out if xp is np else xp.asnumpy(out)

    def _check_open(self) -> None:
        if self._closed:
            raise EngineClosedError("this engine was closed; open a new Session")

    # -- preparation -----------------------------------------------------------
    def prepare(self, bounds: Bounds | None = None) -> PreparedSpectra:
        self._check_open()
        xp = self.xp
        Rr, Rc = self.dataset_shape[:2]
        b: Bounds = (0, Rr, 0, Rc) if bounds is None else (
            int(bounds[0]), int(bounds[1]), int(bounds[2]), int(bounds[3]))
        window = self._bf_counts[b[0]:b[1], b[2]:b[3]]
        shape = (fft_friendly_size(b[1] - b[0]), fft_friendly_size(b[3] - b[2]))
        n_bf = self.bf.count
        n_cols_half = shape[1] // 2 + 1
        G = xp.empty((n_bf, shape[0] * n_cols_half), dtype=self.complex_dtype)
        per_pixel = shape[0] * shape[1] * np.dtype(self.complex_dtype).itemsize * 2
        chunk = max(1, self.staging_bytes // per_pixel)
        for s in range(0, n_bf, chunk):
            block = window[:, :, s:s + chunk].astype(self.real_dtype)
            if block.shape[:2] != shape:
                block = self._pad_with_mean(block, shape)
            spec = xp.fft.rfft2(block, axes=(0, 1))
            G[s:s + chunk] = xp.moveaxis(spec, 2, 0).reshape(block.shape[2], -1)
        nu_r, nu_c = (xp.asarray(a) for a in _half_plane_grid(shape, self.step))
        weights = xp.asarray(np.broadcast_to(
            half_plane_weights(shape[1]), (shape[0], n_cols_half)).ravel().astype(self.real_dtype))
        spectra = PreparedSpectra(
            shape=shape, bounds=b, n_bf=n_bf, G=G, nu_r=nu_r.astype(self.real_dtype),
            nu_c=nu_c.astype(self.real_dtype), weights=weights,
            dc=float(G[:, 0].real.mean()))
        self._spectra.append(spectra)
        return spectra

    def _pad_with_mean(self, block: Any, shape: tuple[int, int]) -> Any:
        # Padding with the mean pattern keeps every measured position and adds only DC.
        mean = block.mean(axis=(0, 1), keepdims=True)
        out = self.xp.broadcast_to(mean, (*shape, block.shape[2])).copy()
        out[:block.shape[0], :block.shape[1]] = block
        return out

    def set_rotation(self, spectra: PreparedSpectra, theta: float, transpose: bool) -> None:
        self._check_open()
        if spectra.rotation == (theta, transpose):
            return
        xp = self.xp
        k = xp.asarray(scan_frame_frequencies(self.bf.k_det, theta, transpose)
                       .astype(self.real_dtype))
        spectra.k = k
        spectra.grids = []
        energy = 0.0
        for sl in self._chunks(spectra):
            mask = trotter_support(k[sl], spectra.nu_r, spectra.nu_c,
                                   self.k_alpha, xp)
            g = overlap_grid(k[sl], spectra.nu_r, spectra.nu_c, mask, self.wavelength,
                             self.k_alpha, self.edge_width, xp)
            spectra.grids.append(g)
            Gc = spectra.G[sl]
            energy += float(xp.sum(mask * (Gc.real**2 + Gc.imag**2) * spectra.weights))
        spectra.energy = energy
        spectra.rotation = (theta, transpose)

    def _chunks(self, spectra: PreparedSpectra) -> list[slice]:
        m = spectra.G.shape[1]
        step = max(1, self.chunk_elements // m)
        return [slice(s, min(s + step, spectra.n_bf)) for s in range(0, spectra.n_bf, step)]

    # -- scoring -----------------------------------------------------------------
    def evaluate(
        self, spectra: PreparedSpectra, candidates: np.ndarray, objective: str = "vp",
        names: tuple[str, ...] = JOINT,
    ) -> np.ndarray:
        self._check_open()
        self._require_rotation(spectra)
        out = np.empty(len(candidates))
        for i, v in enumerate(np.asarray(candidates, dtype=np.float64)):
            params = from_vector(v, names)
            if objective == "vp":
                out[i] = self._vp_loss(spectra, params)
            elif objective == "coherence":
                out[i] = self._coherence_loss(spectra, params)
            elif objective == "phase_variance":
                phase = self.xp.angle(self._object_spectrum_to_image(
                    spectra, self._ssb_spectrum(spectra, params, spectra.grids), 1))
                out[i] = obj.phase_variance_loss(phase, self.xp)
            else:
                raise ValueError(
                    f"unknown objective {objective!r}: use 'vp', 'coherence' or 'phase_variance'")
        self.evaluations += len(candidates)
        return out

    def evaluate_rotations(
        self, spectra: PreparedSpectra, thetas: np.ndarray, transpose: bool,
        candidate: np.ndarray, names: tuple[str, ...] = JOINT,
    ) -> np.ndarray:
        """VP loss of one parameter vector named ``names`` at each rotation θ: (R,). Here
        set_rotation + evaluate per θ, so the spectra end at the last θ; callers set the
        rotation they want afterwards."""
        cand = np.asarray(candidate, dtype=np.float64).reshape(1, -1)
        out = np.empty(len(thetas))
        for i, t in enumerate(thetas):
            self.set_rotation(spectra, float(t), transpose)
            out[i] = self.evaluate(spectra, cand, "vp", names)[0]
        return out

    def _vp_loss(self, spectra: PreparedSpectra, params: Mapping[str, float]) -> float:
        xp = self.xp
        N = xp.zeros(spectra.G.shape[1], dtype=self.complex_dtype)
        D = xp.zeros(spectra.G.shape[1], dtype=self.real_dtype)
        for sl, g in zip(self._chunks(spectra), spectra.grids, strict=True):
            gam = self._gamma_for(g, params)
            N += xp.sum(gam.conj() * spectra.G[sl], axis=0)
            D += xp.sum(gam.real**2 + gam.imag**2, axis=0)
        return obj.vp_loss(N, D, spectra.weights, spectra.energy, xp)

    def _coherence_loss(self, spectra: PreparedSpectra, params: Mapping[str, float]) -> float:
        C = self._ssb_spectrum(spectra, params, spectra.grids) * spectra.n_bf
        return obj.coherence_loss(C, spectra.weights, spectra.energy, spectra.n_bf, self.xp)

    def derivatives(
        self, spectra: PreparedSpectra, candidates: np.ndarray,
        names: tuple[str, ...] = JOINT,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self._check_open()
        self._require_rotation(spectra)
        xp = self.xp
        K, P = len(candidates), len(names)
        pairs = pairs_of(P)
        losses, grads, hessians = np.empty(K), np.empty((K, P)), np.empty((K, P, P))
        M = spectra.G.shape[1]
        for i, v in enumerate(np.asarray(candidates, dtype=np.float64)):
            params = from_vector(v, names)
            N = xp.zeros(M, dtype=self.complex_dtype)
            D = xp.zeros(M, dtype=self.real_dtype)
            dN = xp.zeros((P, M), dtype=self.complex_dtype)
            dD = xp.zeros((P, M), dtype=self.real_dtype)
            d2N = xp.zeros((len(pairs), M), dtype=self.complex_dtype)
            d2D = xp.zeros((len(pairs), M), dtype=self.real_dtype)
            for sl, g in zip(self._chunks(spectra), spectra.grids, strict=True):
                G = spectra.G[sl]
                if names == JOINT:
                    gam, dg, d2g = gamma_derivatives(g, params, 2, xp)
                else:
                    gam, dg, d2g = gamma_general_derivatives(g, params, names, xp)
                gc = gam.conj()
                N += xp.sum(gc * G, axis=0)
                D += xp.sum(gam.real**2 + gam.imag**2, axis=0)
                for p in range(P):
                    dN[p] += xp.sum(dg[p].conj() * G, axis=0)
                    dD[p] += xp.sum(2 * (gc * dg[p]).real, axis=0)
                for n, (p, q) in enumerate(pairs):
                    d2N[n] += xp.sum(d2g[n].conj() * G, axis=0)
                    d2D[n] += xp.sum(2 * (dg[q].conj() * dg[p] + gc * d2g[n]).real, axis=0)
            losses[i], grads[i], hessians[i] = obj.vp_loss_derivatives(
                N, D, dN, dD, d2N, d2D, spectra.weights, spectra.energy, xp)
        self.evaluations += K
        return losses, grads, hessians

    def _check_reconstruct(self, spectra: PreparedSpectra, method: str) -> None:
        self._check_open()
        self._require_rotation(spectra)
        if method not in ("ssb", "wiener"):
            raise ValueError(f"unknown method {method!r}: use 'ssb' or 'wiener'")

    def _require_rotation(self, spectra: PreparedSpectra) -> None:
        if spectra.rotation is None:
            raise RuntimeError("set_rotation() must be called on these spectra first")

    # -- reconstruction ------------------------------------------------------------
    def reconstruct(
        self, spectra: PreparedSpectra, params: dict[str, float], upsample: int = 1,
        method: str = "ssb",
    ) -> np.ndarray:
        self._check_reconstruct(spectra, method)
        f = int(upsample)
        grids, index, conj = self._fine_grids(spectra, f)
        if method == "ssb":
            O = self._ssb_spectrum(spectra, params, grids, index, conj)
        else:
            O = self._wiener_spectrum(spectra, params, grids, index, conj)
        image = self._object_spectrum_to_image(spectra, O, f)
        out = image.astype(np.complex64)
        return out if self.xp is np else self.xp.asnumpy(out)

    def _fine_grids(
        self, spectra: PreparedSpectra, f: int
    ) -> tuple[list[OverlapGrid], Any, Any]:
        """Overlap geometry on the f-times finer grid and the map to the coarse spectra."""
        xp = self.xp
        Nr, Nc = spectra.shape
        if f == 1:
            return spectra.grids, None, None
        fine_shape = (f * Nr, f * Nc)
        step = (self.step[0] / f, self.step[1] / f)
        nu_r, nu_c = (xp.asarray(a.astype(self.real_dtype))
                      for a in _half_plane_grid(fine_shape, step))
        index, conj = (xp.asarray(a) for a in _alias_map(spectra.shape, fine_shape))
        grids = []
        step_b = max(1, self.chunk_elements // nu_r.size)
        for s in range(0, spectra.n_bf, step_b):
            k = spectra.k[s:s + step_b]
            mask = trotter_support(k, nu_r, nu_c, self.k_alpha, xp)
            grids.append(overlap_grid(k, nu_r, nu_c, mask, self.wavelength, self.k_alpha,
                                      self.edge_width, xp))
        return grids, index, conj

    def _coarse_values(self, spectra: PreparedSpectra, sl: slice, index: Any, conj: Any) -> Any:
        G = spectra.G[sl]
        if index is None:
            return G
        vals = G[:, index]
        return self.xp.where(conj[None, :], vals.conj(), vals)

    def _gamma_for(self, g: OverlapGrid, params: Mapping[str, float]) -> Any:
        if has_higher_order(params):
            return gamma_general(g, params, self.xp)
        return gamma(g, params, self.xp)

    def _grid_slices(self, spectra: PreparedSpectra, grids: list[OverlapGrid]) -> list[slice]:
        out, s = [], 0
        for g in grids:
            n = int(g.k_r.shape[0])
            out.append(slice(s, s + n))
            s += n
        return out

    def _ssb_spectrum(
        self, spectra: PreparedSpectra, params: Mapping[str, float],
        grids: list[OverlapGrid], index: Any = None, conj: Any = None,
    ) -> Any:
        """O(ν) = (1/B) Σ_b m_b G_b conj(Γ_b)/max(|Γ_b|, ε) on the half plane."""
        xp = self.xp
        O = None
        for sl, g in zip(self._grid_slices(spectra, grids), grids, strict=True):
            gam = self._gamma_for(g, params)
            G = self._coarse_values(spectra, sl, index, conj)
            part = xp.sum(G * gam.conj() / xp.maximum(xp.abs(gam), RECON_EPS), axis=0)
            O = part if O is None else O + part
        assert O is not None
        return O / spectra.n_bf

    def _wiener_spectrum(
        self, spectra: PreparedSpectra, params: Mapping[str, float],
        grids: list[OverlapGrid], index: Any, conj: Any,
    ) -> Any:
        """O = N/(D + ε): the least-squares object of the VP objective."""
        xp = self.xp
        N = D = None
        for sl, g in zip(self._grid_slices(spectra, grids), grids, strict=True):
            gam = self._gamma_for(g, params)
            G = self._coarse_values(spectra, sl, index, conj)
            n_part = xp.sum(gam.conj() * G, axis=0)
            d_part = xp.sum(gam.real**2 + gam.imag**2, axis=0)
            N = n_part if N is None else N + n_part
            D = d_part if D is None else D + d_part
        assert N is not None and D is not None
        return N / (D + 1e-3 * spectra.n_bf)

    def _object_spectrum_to_image(self, spectra: PreparedSpectra, O: Any, f: int) -> Any:
        """O(ν) is anti-Hermitian off DC, so O(r) = DC + i·irfft2(-i·O): one inverse FFT."""
        Nr, Nc = spectra.shape
        shape = (f * Nr, f * Nc)
        H = (-1j * O).reshape(shape[0], shape[1] // 2 + 1)
        H[0, 0] = 0
        h = self._irfft2(H, shape)
        dc = spectra.dc / (shape[0] * shape[1])
        return dc + 1j * h

    def _irfft2(self, H: Any, shape: tuple[int, int]) -> Any:
        return self.xp.fft.irfft2(H, s=shape)

    # -- lifetime --------------------------------------------------------------
    def release(self, spectra: PreparedSpectra) -> None:
        if spectra in self._spectra:
            self._spectra.remove(spectra)
        spectra.G = spectra.k = None
        spectra.grids = []
        spectra.extra = {}

    def memory_info(self) -> dict[str, Any]:
        arrays: list[Any] = [self._bf_counts] if not self._closed else []
        for s in self._spectra:
            arrays += [s.G, s.nu_r, s.nu_c, s.weights]
            for g in s.grids:
                arrays += [g.amp_minus, g.amp_plus]
        return {"live_bytes": int(sum(getattr(a, "nbytes", 0) for a in arrays))}

    def close(self) -> None:
        if self._closed:
            return
        for model in self.models:
            model.detach()
        self.models.clear()
        for s in list(self._spectra):
            self.release(s)
        self._bf_counts = None
        self._closed = True
        self._free_pool()

    def _free_pool(self) -> None:
        """Return pooled device memory (no-op on the host)."""

    @property
    def closed(self) -> bool:
        return self._closed


def _half_plane_grid(
    shape: tuple[int, int], step: tuple[float, float]
) -> tuple[np.ndarray, np.ndarray]:
    """Flattened (ν_r, ν_c) of the rfft half plane, row-major."""
    nr = np.fft.fftfreq(shape[0], step[0])
    nc = np.fft.rfftfreq(shape[1], step[1])
    R, C = np.meshgrid(nr, nc, indexing="ij")
    return R.ravel(), C.ravel()


def _alias_map(
    coarse: tuple[int, int], fine: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """For each fine half-plane frequency: index into the coarse half plane, and conj flag.

    Fine and coarse grids share the frequency spacing, so fine index n maps to n mod N;
    columns past the coarse half plane are read from -ν by Hermitian symmetry.
    """
    Nr, Nc = coarse
    nr = np.round(np.fft.fftfreq(fine[0]) * fine[0]).astype(np.int64) % Nr
    nc = np.arange(fine[1] // 2 + 1) % Nc
    R, C = np.meshgrid(nr, nc, indexing="ij")
    conj = C > Nc // 2
    R = np.where(conj, (-R) % Nr, R)
    C = np.where(conj, Nc - C, C)
    return (R * (Nc // 2 + 1) + C).ravel(), conj.ravel()

"""The NumPy reference operations, written once over an array module ``xp``.

A component, not a base class: the CPU engine calls it with NumPy and its host
record (its Numba kernels are tested against it), the CUDA engine calls it with
CuPy and a float32 geometry for what its kernels do not cover (other objectives,
opted-in coefficients, higher-order reconstruction). Reductions run in a fixed
order (BF chunks in index order, candidates one after another), so the same
inputs give the same losses bit for bit on the same device. The dense overlap geometry
of a chunk is built when a chunk is used (``LazyGrids``) and kept only when the whole
set is small: a large scan never holds a (B, M) geometry next to its spectra.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np

from ..mapped_pages import release_pages
from ..params import JOINT, from_vector
from ..physics import objective as obj
from ..physics.aliases import alias_map, fit_support
from ..physics.apodisation import hann_2d
from ..physics.geometry import (
    BFPixels,
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
from .protocol import Engine, Spectra
from .records import DatasetGeometry, PreparedSpectra, ReferenceGeometry

RECON_EPS = 1e-2  # floor of |Γ| in the SSB correction (Γ ~ 1 inside the trotters)
WIENER_EPS = 1e-3  # Wiener regulariser per BF pixel
RECON_METHODS = ("ssb", "wiener")
GRID_BYTES_PER_PAIR = 17  # amp_minus, amp_plus (float64) and minus_lobe (bool) per (b, ν)
GRID_CACHE_BYTES = 64 * 2**20  # keep a rotation's dense geometry when it is at most this

AnySpectra = PreparedSpectra[Any]


class Reference:
    """Reference prepare geometry, scoring, derivatives and reconstruction over ``xp``."""

    def __init__(
        self, geo: DatasetGeometry, xp: Any, real_dtype: Any, chunk_elements: int,
        alias_spacing: np.ndarray | None = None,
        irfft2: Callable[[Any, tuple[int, int]], Any] | None = None,
        grid_cache_bytes: int = GRID_CACHE_BYTES,
    ) -> None:
        self.geo = geo
        self.alias_spacing = np.zeros(4) if alias_spacing is None else alias_spacing
        self.grid_cache_bytes = grid_cache_bytes
        self.xp = xp
        self.real_dtype = real_dtype
        self.complex_dtype = np.result_type(real_dtype, np.complex64)
        self.chunk_elements = chunk_elements
        self.irfft2 = irfft2 if irfft2 is not None else (
            lambda H, shape: xp.fft.irfft2(H, s=shape))

    # -- geometry ------------------------------------------------------------------------
    def half_plane(self, shape: tuple[int, int]) -> ReferenceGeometry:
        """Frequencies and rfft weights of the half plane of ``shape``, in ``real_dtype``."""
        xp = self.xp
        nu_r, nu_c = (xp.asarray(a.astype(self.real_dtype))
                      for a in half_plane_grid(shape, self.geo.step))
        weights = xp.asarray(np.broadcast_to(
            half_plane_weights(shape[1]), (shape[0], shape[1] // 2 + 1)).ravel()
            .astype(self.real_dtype))
        return ReferenceGeometry(nu_r=nu_r, nu_c=nu_c, weights=weights)

    def spectra(self, window: Any, shape: tuple[int, int], staging_bytes: int,
                by_frequency: bool = False, apodise: bool = False) -> Any:
        """(B, M) half-plane spectra of a (h, w, B) window of BF counts, padded to ``shape``
        with its mean pattern, staged a chunk of BF pixels at a time. ``by_frequency``: stored
        frequency-major, (M, B) C order, returned as its (B, M) transpose (what a kernel that
        sums over b per ν reads in order). ``apodise``: the spectra of (I − Ī)·h, h the
        scan-window Hann (physics.apodisation), with the same DC (the mean pattern's)."""
        xp = self.xp
        n_bf = window.shape[2]
        M = shape[0] * (shape[1] // 2 + 1)
        G = (xp.empty((M, n_bf), dtype=self.complex_dtype).T if by_frequency
             else xp.empty((n_bf, M), dtype=self.complex_dtype))
        per_pixel = shape[0] * shape[1] * np.dtype(self.complex_dtype).itemsize * 2
        chunk = max(1, staging_bytes // per_pixel)
        h, w = window.shape[:2]
        weights = hann_2d((h, w), (h, w), xp)[:, :, None] if apodise else None
        for s in range(0, n_bf, chunk):
            block = window[:, :, s:s + chunk].astype(self.real_dtype)
            if weights is not None:  # (I − Ī)·h, zero on the padding
                mean = block.mean(axis=(0, 1), keepdims=True, dtype=np.float64)
                staged = xp.zeros((*shape, block.shape[2]), dtype=self.real_dtype)
                staged[:h, :w] = (block - mean) * weights
                block = staged
            elif block.shape[:2] != shape:
                block = self._pad_with_mean(block, shape)
            spec = xp.fft.rfft2(block, axes=(0, 1))
            if weights is not None:
                spec[0, 0] = (mean[0, 0] * (shape[0] * shape[1])).astype(self.real_dtype)
            del block
            n = spec.shape[2]
            if by_frequency:
                G.T[:, s:s + n] = spec.reshape(M, n)
            else:  # through a view of G's rows (contiguous): no reshaped copy
                G[s:s + n].reshape(n, shape[0], -1)[...] = xp.moveaxis(spec, 2, 0)
            del spec
        return G

    def rows(self, G: Any, sl: slice) -> Any:
        """BF pixels ``sl`` of the spectra, C-contiguous (a copy only when G is stored
        frequency-major): every reference reduction then runs in the same order."""
        return self.xp.ascontiguousarray(G[sl])

    def _pad_with_mean(self, block: Any, shape: tuple[int, int]) -> Any:
        # Padding with the mean pattern keeps every measured position and adds only DC.
        mean = block.mean(axis=(0, 1), keepdims=True)
        out = self.xp.broadcast_to(mean, (*shape, block.shape[2])).copy()
        out[:block.shape[0], :block.shape[1]] = block
        return out

    def chunks(self, n_bf: int, m: int) -> list[slice]:
        """BF pixel chunks of at most ``chunk_elements`` (b, ν) pairs."""
        step = max(1, self.chunk_elements // m)
        return [slice(s, min(s + step, n_bf)) for s in range(0, n_bf, step)]

    def grid(self, k: Any, nu_r: Any, nu_c: Any, fine: bool = False) -> tuple[Any, OverlapGrid]:
        """Trotter support and overlap geometry of BF frequencies ``k`` on (ν_r, ν_c): the
        scan grid's (the fit's pairs), or a ``fine`` reconstruction grid's (every pair)."""
        geo = self.geo
        mask = self.support(k, nu_r, nu_c) if not fine else trotter_support(
            k, nu_r, nu_c, geo.k_alpha, self.xp)
        return mask, overlap_grid(k, nu_r, nu_c, mask, geo.wavelength, geo.k_alpha,
                                  geo.edge_width, self.xp)

    def rotate(self, G: Any, n_bf: int, ref: ReferenceGeometry, theta: float,
               transpose: bool) -> float:
        """Set ``ref``'s k and (lazy) grids for this rotation; returns the sideband energy
        (its trotter masks one chunk at a time)."""
        xp = self.xp
        k = xp.asarray(scan_frame_frequencies(self.geo.bf.k_det, theta, transpose)
                       .astype(self.real_dtype))
        ref.k = k
        slices = self.chunks(n_bf, G.shape[1])
        ref.grids = self.lazy_grids(k, ref.nu_r, ref.nu_c, slices)
        energy = 0.0
        for sl in slices:
            mask = self.support(k[sl], ref.nu_r, ref.nu_c)
            Gc = self.rows(G, sl)
            energy += float(xp.sum(mask * (Gc.real**2 + Gc.imag**2) * ref.weights))
        return energy

    def support(self, k: Any, nu_r: Any, nu_c: Any) -> Any:
        """The scan grid's pairs the fit uses (``physics.aliases.fit_support``: without the
        pixels an alias shares where ``alias_spacing`` has orders; fine grids keep them)."""
        return fit_support(k, nu_r, nu_c, self.geo.k_alpha, self.alias_spacing, self.xp)

    def lazy_grids(self, k: Any, nu_r: Any, nu_c: Any, slices: list[slice],
                   cache: bool | None = None, fine: bool = False) -> LazyGrids:
        """The overlap grids of BF chunks ``slices`` of ``k`` on (ν_r, ν_c), built when used;
        kept (``cache``) by default when they take at most ``grid_cache_bytes``."""
        if cache is None:
            cache = int(k.shape[0]) * int(nu_r.size) * GRID_BYTES_PER_PAIR <= (
                self.grid_cache_bytes)
        return LazyGrids(lambda sl: self.grid(k[sl], nu_r, nu_c, fine)[1], slices, cache)

    # -- scoring -------------------------------------------------------------------------
    def evaluate(
        self, spectra: AnySpectra, ref: ReferenceGeometry, candidates: np.ndarray,
        objective: str = "vp", names: tuple[str, ...] = JOINT,
    ) -> np.ndarray:
        out = np.empty(len(candidates))
        for i, v in enumerate(np.asarray(candidates, dtype=np.float64)):
            params = from_vector(v, names)
            if objective == "vp":
                out[i] = self._vp_loss(spectra, ref, params)
            elif objective == "coherence":
                out[i] = self._coherence_loss(spectra, ref, params)
            elif objective == "phase_variance":
                phase = self.xp.angle(self.object_spectrum_to_image(
                    spectra, self.ssb_spectrum(spectra, params, ref.grids), 1))
                out[i] = obj.phase_variance_loss(phase, self.xp)
            else:
                raise ValueError(
                    f"unknown objective {objective!r}: use 'vp', 'coherence' or 'phase_variance'")
        return out

    def _vp_loss(self, spectra: AnySpectra, ref: ReferenceGeometry,
                 params: Mapping[str, float]) -> float:
        xp = self.xp
        M = spectra.G.shape[1]
        N = xp.zeros(2 * M, dtype=self.complex_dtype)  # per trotter lobe
        D = xp.zeros(2 * M, dtype=self.real_dtype)
        for sl, g in zip(self.chunks(spectra.n_bf, M), ref.grids, strict=True):
            gam = self.gamma_for(g, params)
            N += obj.lobe_sums(gam.conj() * self.rows(spectra.G, sl), g.minus_lobe, xp)
            D += obj.lobe_sums(gam.real**2 + gam.imag**2, g.minus_lobe, xp)
        return obj.vp_loss(N, D, obj.lobe_weights(ref.weights, xp), spectra.energy, xp)

    def _coherence_loss(self, spectra: AnySpectra, ref: ReferenceGeometry,
                        params: Mapping[str, float]) -> float:
        C = self.ssb_spectrum(spectra, params, ref.grids) * spectra.n_bf
        return obj.coherence_loss(C, ref.weights, spectra.energy, spectra.n_bf, self.xp)

    def derivatives(
        self, spectra: AnySpectra, ref: ReferenceGeometry, candidates: np.ndarray,
        names: tuple[str, ...] = JOINT,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        K, P = len(candidates), len(names)
        losses, grads, hessians = np.empty(K), np.empty((K, P)), np.empty((K, P, P))
        weights = obj.lobe_weights(ref.weights, self.xp)
        for i, v in enumerate(np.asarray(candidates, dtype=np.float64)):
            N, D, dN, dD, d2N, d2D = self._derivative_sums(spectra, ref, from_vector(v, names),
                                                           names)
            losses[i], grads[i], hessians[i] = obj.vp_loss_derivatives(
                N, D, dN, dD, d2N, d2D, weights, spectra.energy, self.xp)
        return losses, grads, hessians

    def misfit_terms(
        self, spectra: AnySpectra, ref: ReferenceGeometry, candidate: np.ndarray,
        names: tuple[str, ...] = JOINT,
    ) -> obj.MisfitTerms:
        """``physics.objective.MisfitTerms`` (per-frequency terms and the Hessian), float64
        on the host, from one pass of the derivative sums."""
        params = from_vector(np.asarray(candidate, dtype=np.float64).ravel(), names)
        return obj.vp_misfit_terms(*self._derivative_sums(spectra, ref, params, names),
                                   obj.lobe_weights(ref.weights, self.xp), spectra.energy,
                                   names.index("C10"), self.xp)

    def _derivative_sums(self, spectra: AnySpectra, ref: ReferenceGeometry,
                         params: Mapping[str, float], names: tuple[str, ...],
                         ) -> tuple[Any, Any, Any, Any, Any, Any]:
        """Per-lobe sums N, D (2M,), dN, dD (P, 2M), d2N, d2D (P(P+1)/2, 2M) over the BF
        chunks."""
        xp = self.xp
        P = len(names)
        pairs = pairs_of(P)
        M = spectra.G.shape[1]
        L = 2 * M  # per-lobe sums
        N = xp.zeros(L, dtype=self.complex_dtype)
        D = xp.zeros(L, dtype=self.real_dtype)
        dN = xp.zeros((P, L), dtype=self.complex_dtype)
        dD = xp.zeros((P, L), dtype=self.real_dtype)
        d2N = xp.zeros((len(pairs), L), dtype=self.complex_dtype)
        d2D = xp.zeros((len(pairs), L), dtype=self.real_dtype)
        for sl, g in zip(self.chunks(spectra.n_bf, M), ref.grids, strict=True):
            G = self.rows(spectra.G, sl)
            if names == JOINT:
                gam, dg, d2g = gamma_derivatives(g, params, 2, xp)
            else:
                gam, dg, d2g = gamma_general_derivatives(g, params, names, xp)
            gc = gam.conj()
            lobe = g.minus_lobe
            N += obj.lobe_sums(gc * G, lobe, xp)
            D += obj.lobe_sums(gam.real**2 + gam.imag**2, lobe, xp)
            for p in range(P):
                dN[p] += obj.lobe_sums(dg[p].conj() * G, lobe, xp)
                dD[p] += obj.lobe_sums(2 * (gc * dg[p]).real, lobe, xp)
            for n, (p, q) in enumerate(pairs):
                d2N[n] += obj.lobe_sums(d2g[n].conj() * G, lobe, xp)
                d2D[n] += obj.lobe_sums(2 * (dg[q].conj() * dg[p] + gc * d2g[n]).real,
                                        lobe, xp)
        return N, D, dN, dD, d2N, d2D

    # -- reconstruction ------------------------------------------------------------------
    def reconstruct(
        self, spectra: AnySpectra, ref: ReferenceGeometry, params: Mapping[str, float],
        upsample: int = 1, method: str = "ssb", keep: np.ndarray | None = None,
    ) -> Any:
        """Complex64 object on the (f·Nr, f·Nc) grid, on ``xp``'s device; ``keep`` (B,)
        bool: only those BF pixels enter the sums (``physics.geometry.nearest_bf_pixels``),
        None: all."""
        f = int(upsample)
        grids, index, conj = self.fine_grids(spectra, ref, f)
        kept = None if keep is None else PixelSubset(self.xp.asarray(keep),
                                                       int(np.count_nonzero(keep)))
        if method == "ssb":
            O = self.ssb_spectrum(spectra, params, grids, index, conj, kept)
        else:
            O = self._wiener_spectrum(spectra, params, grids, index, conj, kept)
        return self.object_spectrum_to_image(spectra, O, f).astype(np.complex64)

    def fine_grids(
        self, spectra: AnySpectra, ref: ReferenceGeometry, f: int
    ) -> tuple[Sequence[OverlapGrid], Any, Any]:
        """Overlap geometry on the f-times finer grid (built a BF chunk at a time as it is
        used, never held whole) and the map to the coarse spectra."""
        if f == 1:
            return ref.grids, None, None
        nu_r, nu_c, index, conj = self.fine_frequencies(spectra, f)
        slices = self.chunks(spectra.n_bf, int(nu_r.size))
        return (self.lazy_grids(ref.k, nu_r, nu_c, slices, cache=False, fine=True), index,
                conj)

    def fine_frequencies(self, spectra: AnySpectra, f: int) -> tuple[Any, Any, Any, Any]:
        """(ν_r, ν_c) of the f-times finer half plane and its map to the coarse spectra."""
        xp = self.xp
        fine_shape = (f * spectra.shape[0], f * spectra.shape[1])
        step = (self.geo.step[0] / f, self.geo.step[1] / f)
        nu_r, nu_c = (xp.asarray(a.astype(self.real_dtype))
                      for a in half_plane_grid(fine_shape, step))
        index, conj = (xp.asarray(a) for a in alias_map(spectra.shape, fine_shape))
        return nu_r, nu_c, index, conj

    def _coarse_values(self, G_all: Any, sl: slice, index: Any, conj: Any) -> Any:
        G = self.rows(G_all, sl)
        if index is None:
            return G
        vals = G[:, index]
        return self.xp.where(conj[None, :], vals.conj(), vals)

    def gamma_for(self, g: OverlapGrid, params: Mapping[str, float]) -> Any:
        if has_higher_order(params):
            return gamma_general(g, params, self.xp)
        return gamma(g, params, self.xp)

    def ssb_spectrum(
        self, spectra: AnySpectra, params: Mapping[str, float],
        grids: Iterable[OverlapGrid], index: Any = None, conj: Any = None,
        keep: PixelSubset | None = None,
    ) -> Any:
        """O(ν) = (1/B) Σ_b m_b G_b conj(Γ_b)/max(|Γ_b|, ε) on the half plane (``keep``:
        the sum over those pixels only, B their count)."""
        xp = self.xp
        O = None
        for sl, g in _with_slices(grids):
            gam = self.gamma_for(g, params)
            G = self._coarse_values(spectra.G, sl, index, conj)
            term = G * gam.conj() / xp.maximum(xp.abs(gam), RECON_EPS)
            part = xp.sum(_kept(xp, term, keep, sl), axis=0)
            O = part if O is None else O + part
        assert O is not None
        return O / _count(spectra.n_bf, keep)

    def _wiener_spectrum(
        self, spectra: AnySpectra, params: Mapping[str, float],
        grids: Iterable[OverlapGrid], index: Any, conj: Any,
        keep: PixelSubset | None = None,
    ) -> Any:
        """O = N/(D + ε): the least-squares object of the VP objective (``keep``: as in
        ``ssb_spectrum``)."""
        xp = self.xp
        N = D = None
        for sl, g in _with_slices(grids):
            gam = self.gamma_for(g, params)
            G = self._coarse_values(spectra.G, sl, index, conj)
            n_part = xp.sum(_kept(xp, gam.conj() * G, keep, sl), axis=0)
            d_part = xp.sum(_kept(xp, gam.real**2 + gam.imag**2, keep, sl), axis=0)
            N = n_part if N is None else N + n_part
            D = d_part if D is None else D + d_part
        assert N is not None and D is not None
        return N / (D + WIENER_EPS * _count(spectra.n_bf, keep))

    def object_spectrum_to_image(self, spectra: AnySpectra, O: Any, f: int) -> Any:
        """O(ν) is anti-Hermitian off DC, so O(r) = DC + i·irfft2(-i·O): one inverse FFT."""
        Nr, Nc = spectra.shape
        shape = (f * Nr, f * Nc)
        H = (-1j * O).reshape(shape[0], shape[1] // 2 + 1)
        H[0, 0] = 0
        h = self.irfft2(H, shape)
        dc = spectra.dc / (shape[0] * shape[1])
        return dc + 1j * h


def check_method(method: str) -> None:
    if method not in RECON_METHODS:
        raise ValueError(f"unknown method {method!r}: use 'ssb' or 'wiener'")


def cropped(image: Any, crop: tuple[int, int, int, int] | None) -> Any:
    """The (row start, stop, col start, stop) part of an image, a view (None: all)."""
    if crop is None:
        return image
    r0, r1, c0, c1 = crop
    return image[r0:r1, c0:c1]


def evaluate_rotations_per_theta(
    engine: Engine, spectra: Spectra, thetas: np.ndarray, transpose: bool,
    candidate: np.ndarray, names: tuple[str, ...] = JOINT,
) -> np.ndarray:
    """VP loss of one parameter vector at each rotation θ through ``engine``'s own
    set_rotation + evaluate per θ, so the spectra end at the last θ."""
    cand = np.asarray(candidate, dtype=np.float64).reshape(1, -1)
    out = np.empty(len(thetas))
    for i, t in enumerate(thetas):
        engine.set_rotation(spectra, float(t), transpose)
        out[i] = engine.evaluate(spectra, cand, "vp", names)[0]
    return out


def host_bf_counts(counts: Any, bf: BFPixels) -> np.ndarray:
    """BF pixels of every pattern, (Rr, Rc, B) in the counts' dtype, read row by row
    (corrected counts, ``livessb.preprocess.CorrectedCounts``: their float32 rows). A
    memory-mapped file's pages are released behind each row: only the BF counts stay."""
    rows, cols = bf.rows, bf.cols
    out = np.empty((*counts.shape[:2], rows.size), dtype=counts.dtype)
    corrected = getattr(counts, "bf_row", None)
    raw = getattr(counts, "counts", counts)  # the file's counts under a correction
    for r in range(counts.shape[0]):
        out[r] = (np.asarray(counts[r])[:, rows, cols] if corrected is None
                  else corrected(np, r, rows, cols))
        release_pages(raw[r])
    return out


def bf_center_of_mass(bf_counts: np.ndarray, geo: DatasetGeometry) -> np.ndarray:
    """COM of each pattern over the BF pixels, detector px from the BF centre: (Rr, Rc, 2)."""
    k_px = np.asarray(geo.bf.k_det / geo.edge_width)  # edge width = one detector pixel
    out = np.empty((*bf_counts.shape[:2], 2))
    for r in range(bf_counts.shape[0]):
        row = bf_counts[r].astype(np.float64)
        total = row.sum(axis=1, keepdims=True)
        out[r] = (row @ k_px) / np.where(total > 0, total, 1.0)
    return out


@dataclass(frozen=True)
class PixelSubset:
    """The BF pixels a reconstruction sums over: a (B,) bool mask in the reference's
    array module and its count (known on the host: no device read)."""

    mask: Any
    count: int


def _kept(xp: Any, terms: Any, keep: PixelSubset | None, sl: slice) -> Any:
    """(b, ν) terms of BF rows ``sl`` with the pixels outside ``keep`` zeroed (the kept
    ones unchanged: with every pixel kept, the sums' bits are those without a mask)."""
    return terms if keep is None else xp.where(keep.mask[sl, None], terms, 0)


def _count(n_bf: int, keep: PixelSubset | None) -> int:
    """The BF pixels the sums run over."""
    return n_bf if keep is None else keep.count


def _with_slices(grids: Iterable[OverlapGrid]) -> Iterator[tuple[slice, OverlapGrid]]:
    """Each grid with the BF rows it covers (grids of consecutive chunks)."""
    s = 0
    for g in grids:
        n = int(g.k_r.shape[0])
        yield slice(s, s + n), g
        s += n


class LazyGrids(Sequence[OverlapGrid]):
    """The overlap grids of consecutive BF chunks, each built when it is used; kept
    after the first build when ``cache`` (else rebuilt per use: the same values)."""

    def __init__(self, build: Callable[[slice], OverlapGrid], slices: list[slice],
                 cache: bool) -> None:
        self._build, self.slices, self.cache = build, slices, cache
        self._kept: dict[int, OverlapGrid] = {}

    def __len__(self) -> int:
        return len(self.slices)

    @overload
    def __getitem__(self, i: int) -> OverlapGrid: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[OverlapGrid]: ...

    def __getitem__(self, i: int | slice) -> OverlapGrid | Sequence[OverlapGrid]:
        if isinstance(i, slice):
            return [self[j] for j in range(len(self))[i]]
        i = range(len(self))[i]  # negative indices; IndexError past the end
        g = self._kept.get(i)
        if g is None:
            g = self._build(self.slices[i])
            if self.cache:
                self._kept[i] = g
        return g

    def kept(self) -> list[OverlapGrid]:
        """The grids built and kept so far (what they hold in memory)."""
        return list(self._kept.values())


def half_plane_grid(
    shape: tuple[int, int], step: tuple[float, float]
) -> tuple[np.ndarray, np.ndarray]:
    """Flattened (ν_r, ν_c) of the rfft half plane, row-major."""
    nr = np.fft.fftfreq(shape[0], step[0])
    nc = np.fft.rfftfreq(shape[1], step[1])
    R, C = np.meshgrid(nr, nc, indexing="ij")
    return R.ravel(), C.ravel()


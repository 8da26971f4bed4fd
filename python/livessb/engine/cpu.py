"""NumPy/SciPy engine on the host (tests, CI, laptops), float64.

Composes the NumPy reference operations (``engine.reference``) with fused Numba kernels
over the trotter pairs only, which cover the six-parameter VP objective and the quadratic
reconstruction; the reference runs the rest and is what the kernels are tested against
(``kernels=False`` runs it for everything). Memory: the BF counts, the spectra G (stored
frequency-major, the kernels' order) and O(B + M) arrays; the kernels find each frequency's
trotter pairs from k themselves (a small scan's are kept, ``PAIR_CACHE_BYTES``), and the
reference's dense (B, M) geometry is built a chunk at a time when it is used (kept if small).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..dataset import Dataset4D
from ..params import JOINT, N_JOINT, to_vector
from ..physics import objective as obj
from ..physics.aliases import alias_spacing, check_alias_pixels
from ..physics.apodisation import apodised_for, check_scan_window
from ..physics.frequencies import (
    check_scan_frequencies,
    corrects_noise,
    effective_chunk,
    effective_frequencies,
    frequencies_from_sums,
    poisson_noise_energy,
    sums_by_axis,
    tables_for,
)
from ..physics.geometry import (
    fft_friendly_size,
    nearest_bf_pixels,
    scan_frame_frequencies,
    to_detector_frame,
)
from ..physics.optics import aperture, has_higher_order
from ..results import Bounds
from ..xp import to_host
from .lifetime import Lifetime
from .protocol import Detachable, Spectra
from .records import (
    DatasetGeometry,
    FineFrequencies,
    HostPart,
    KernelGeometry,
    PairPack,
    PreparedSpectra,
)
from .reference import (
    RECON_EPS,
    WIENER_EPS,
    LazyGrids,
    Reference,
    bf_center_of_mass,
    check_method,
    cropped,
    evaluate_rotations_per_theta,
    host_bf_counts,
)
from .spikes import repair_spikes

SUMS_BYTES = 64 * 2**20  # the scoring kernel's per-(lobe, ν) sums of one candidate block
# Trotter pairs kept (every window, rotation and grid of the engine together): a small
# scan's previews and fits then skip the pair search; a large one finds them per call.
PAIR_CACHE_BYTES = 384 * 2**20
PAIR_BYTES = 21  # int32 pixel, two float64 aperture products, the lobe flag

_NO_PACK = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32), np.zeros(0),
            np.zeros(0), np.zeros(0, dtype=bool))

HostSpectra = PreparedSpectra[HostPart]


def pack_bytes(n_bf: int, M: int) -> int:
    """A pair pack's size bound on M frequencies: every BF pixel inside, and its indptr."""
    return (PAIR_BYTES * n_bf + 8) * M


class CPUEngine:
    """``engine.protocol.Engine`` on the host."""

    name = "cpu"

    def __init__(
        self, dataset: Dataset4D, staging_budget_MiB: float = 256,
        chunk_elements: int = 1 << 18, kernels: bool = True, scan_frequencies: str = "effective",
        alias_pixels: str = "kept", scan_window: str = "none",
    ) -> None:
        self.scan_frequencies = check_scan_frequencies(scan_frequencies)
        self.alias_pixels = check_alias_pixels(alias_pixels)
        self.scan_window = check_scan_window(scan_window)
        self.kernels = bool(kernels)
        self.staging_bytes = int(staging_budget_MiB * 2**20)
        self.evaluations = 0
        self._life = Lifetime(HostPart)
        self.models: list[Detachable] = self._life.models
        self.scan_memo = self._life.memo
        self._chunk_elements = chunk_elements
        self._bf_counts: np.ndarray | None = None
        self._bind(dataset)

    def _bind(self, dataset: Dataset4D) -> None:
        self.geo = DatasetGeometry.of(dataset)
        spacing = alias_spacing(self.geo.step, self.geo.k_alpha, self.alias_pixels)
        self.reference = Reference(self.geo, np, np.float64, self._chunk_elements, spacing)
        bf = dataset.bright_field
        # Detector frequency (1/Å) of the detector rows/columns the BF pixels span, for the
        # phase tables (filled per frequency and candidate; a pixel's entry: row - r0).
        w = self.geo.edge_width
        rows, cols = self.geo.bf.rows.astype(np.int64), self.geo.bf.cols.astype(np.int64)
        r0, c0, r1, c1 = int(rows.min()), int(cols.min()), int(rows.max()) + 1, int(cols.max()) + 1
        self._row_off = (np.arange(r0, r1) - bf.center_row) * w
        self._col_off = (np.arange(c0, c1) - bf.center_col) * w
        self._det_r, self._det_c = rows - r0, cols - c0
        self._aperture = aperture_constants(self.geo.k_alpha, w)  # every pair: f > 1
        # The scan's own grid (f = 1) leaves out the pixels an alias shares ("excluded").
        self._fit_geo = np.concatenate([self._aperture[:5], spacing])
        self._all_pixels = np.ones(self.geo.bf.count, dtype=bool)  # the kernel's keep: all
        self._bf_counts = None  # the last scan's, freed before the next is read
        self._bf_counts = self.upload_bf_counts(dataset.counts)
        self.spikes_repaired = repair_spikes(np, self._bf_counts, 2, self.geo.bf_means)

    def load_counts(self, dataset: Dataset4D) -> bool:
        """``engine.protocol``: the next scan's counts in place of these (on the host
        only the compiled kernels are kept: the arrays are the scan's own)."""
        return self._life.load(dataset, self.geo.shape, self.release, self._bind)

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
    def prepare(self, bounds: Bounds | None = None, apodise: bool | None = None) -> HostSpectra:
        """``apodise``: Hann-weighted spectra (None: per ``scan_window``; False: unweighted)."""
        counts = self._counts()
        Rr, Rc = self.geo.shape[:2]
        b: Bounds = (0, Rr, 0, Rc) if bounds is None else (
            int(bounds[0]), int(bounds[1]), int(bounds[2]), int(bounds[3]))
        shape = (fft_friendly_size(b[1] - b[0]), fft_friendly_size(b[3] - b[2]))
        hann = apodised_for(self.scan_window, apodise)
        # Frequency-major (G.T C-contiguous): the kernels sum over b per ν in memory order.
        window = counts[b[0]:b[1], b[2]:b[3]]
        G = self.reference.spectra(window, shape, self.staging_bytes, by_frequency=True,
                                   apodise=hann)
        geometry = self.reference.half_plane(shape)
        if self.scan_frequencies == "effective":  # physics.frequencies, from G itself
            geometry.nu_r, geometry.nu_c = self._effective_frequencies(
                G, shape, window.shape[:2], geometry.nu_r, geometry.nu_c, hann)
        spectra = PreparedSpectra(
            shape=shape, bounds=b, n_bf=self.geo.bf.count, G=G,
            dc=float(G[:, 0].real.mean()), part=HostPart(geometry), apodised=hann)
        if b != (0, Rr, 0, Rc):  # (the full field's are the dataset's mean pattern)
            spectra.pixel_totals = window.sum(axis=(0, 1), dtype=np.float64)
        self._life.spectra.append(spectra)
        return spectra

    def _effective_frequencies(self, G: np.ndarray, shape: tuple[int, int],
                               data_shape: tuple[int, int], nu_r: np.ndarray,
                               nu_c: np.ndarray, apodised: bool,
                               ) -> tuple[np.ndarray, np.ndarray]:
        """Each bin's measured frequency (``physics.frequencies``; the sums by Numba)."""
        poisson = corrects_noise(self._counts().dtype, apodised)
        if not self.kernels:
            return effective_frequencies(G, shape, data_shape, self.geo.step, nu_r, nu_c,
                                         effective_chunk(self.staging_bytes, shape),
                                         apodised=apodised, poisson=poisson)
        from .frequency_kernels import effective_sums
        energy, cross = sums_by_axis(effective_sums(G.T, shape[0], shape[1]))
        noise = poisson_noise_energy(G, data_shape, shape, apodised) if poisson else None
        return frequencies_from_sums(energy, cross, shape, data_shape, self.geo.step, nu_r,
                                     nu_c, tables=tables_for(apodised), noise=noise)

    def set_rotation(self, spectra: Spectra, theta: float, transpose: bool) -> None:
        sp = self._life.own(spectra)
        if sp.rotation == (theta, transpose):
            return
        self._life.check_open()
        part = sp.part
        stashed = part.previous.pop((theta, transpose), None)
        # The previous rotation's state is small (its dense grids are kept only when
        # small): kept, so a preview at another rotation and the way back rebuild nothing.
        part.previous = ({sp.rotation: (sp.energy, part.geometry.k, part.geometry.grids,
                                        part.kernel)} if sp.rotation is not None else {})
        if stashed:
            sp.energy, part.geometry.k, part.geometry.grids, part.kernel = stashed
            sp.rotation = (theta, transpose)
            return
        sp.energy = self.reference.rotate(sp.G, sp.n_bf, part.geometry, theta, transpose)
        sp.rotation = (theta, transpose)
        part.kernel = None
        if self.kernels:
            k = part.geometry.k
            k_r, k_c = np.ascontiguousarray(k[:, 0]), np.ascontiguousarray(k[:, 1])
            part.kernel = KernelGeometry(
                k_r, k_c, aperture(k_r, k_c, self.geo.k_alpha, self.geo.edge_width),
                to_detector_frame(theta, transpose))

    # -- scoring -----------------------------------------------------------------------
    def evaluate(
        self, spectra: Spectra, candidates: np.ndarray, objective: str = "vp",
        names: tuple[str, ...] = JOINT,
    ) -> np.ndarray:
        sp = self._life.live(spectra)
        geometry, kg = sp.part.geometry, sp.part.kernel
        # The kernels cover the six-parameter VP model; the reference runs the rest.
        if kg is None or objective != "vp" or names != JOINT:
            out = self.reference.evaluate(sp, geometry, candidates, objective, names)
            self.evaluations += len(candidates)
            return out
        vp_sums: Any = _kernels().vp_sums
        cand = np.ascontiguousarray(candidates, dtype=np.float64).reshape(-1, N_JOINT)
        weights = obj.lobe_weights(geometry.weights)  # the k-ν lobe's columns, then k+ν's
        # Candidates a block at a time: the sums (K, 2M) stay within SUMS_BYTES.
        step = max(1, SUMS_BYTES // (weights.size * 24))
        out = np.empty(len(cand))
        for s in range(0, len(cand), step):
            N, D = vp_sums(*self._kernel_args(sp, kg, 1), cand[s:s + step], self._det_r,
                           self._det_c, self._row_off, self._col_off, kg.to_det, kg.k_r,
                           kg.k_c)
            for k in range(N.shape[0]):
                out[s + k] = obj.vp_loss(N[k], D[k], weights, sp.energy)
        self.evaluations += len(cand)
        return to_host(out, "evaluate")  # counted as the device engine's one download

    def evaluate_rotations(
        self, spectra: Spectra, thetas: np.ndarray, transpose: bool,
        candidate: np.ndarray, names: tuple[str, ...] = JOINT,
    ) -> np.ndarray:
        """VP loss of one six-parameter vector at each rotation θ: (R,), every lobe's pixel
        set and the sideband energy held at the grid's middle rotation θ₀ = thetas[R // 2]
        while the phases follow θ (``engine.protocol``); the spectra are left at θ₀.
        Opted-in coefficients (``names`` other than the six) and ``kernels=False`` take
        set_rotation + evaluate per θ (the spectra end at the last θ)."""
        thetas = np.asarray(thetas, dtype=np.float64).ravel()
        if not self.kernels or names != JOINT or len(thetas) == 0:
            return evaluate_rotations_per_theta(self, spectra, thetas, transpose, candidate,
                                                names)
        sp = self._life.own(spectra)
        self.set_rotation(spectra, float(thetas[len(thetas) // 2]), transpose)
        kg = sp.part.kernel
        assert kg is not None
        args = self._kernel_args(sp, kg, 1)  # the held pairs: θ₀'s
        cand = np.ascontiguousarray(candidate, dtype=np.float64).reshape(1, N_JOINT)
        weights = obj.lobe_weights(sp.part.geometry.weights)
        out = np.empty(len(thetas))
        for i, theta in enumerate(thetas):
            k = scan_frame_frequencies(self.geo.bf.k_det, float(theta), transpose)
            N, D = _kernels().vp_sums(
                *args, cand, self._det_r, self._det_c, self._row_off, self._col_off,
                to_detector_frame(float(theta), transpose), np.ascontiguousarray(k[:, 0]),
                np.ascontiguousarray(k[:, 1]))
            out[i] = obj.vp_loss(N[0], D[0], weights, sp.energy)
        self.evaluations += len(thetas)
        return to_host(out, "evaluate_rotations")

    def derivatives(
        self, spectra: Spectra, candidates: np.ndarray, names: tuple[str, ...] = JOINT,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        sp = self._life.live(spectra)
        geometry, kg = sp.part.geometry, sp.part.kernel
        if kg is None or names != JOINT:
            out = self.reference.derivatives(sp, geometry, candidates, names)
            self.evaluations += len(candidates)
            return out
        vp_derivative_sums: Any = _kernels().vp_derivative_sums
        cand = np.ascontiguousarray(candidates, dtype=np.float64).reshape(-1, N_JOINT)
        K = len(cand)
        losses, grads = np.empty(K), np.empty((K, N_JOINT))
        hessians = np.empty((K, N_JOINT, N_JOINT))
        args = self._kernel_args(sp, kg, 1)
        weights = obj.lobe_weights(geometry.weights)
        for k in range(K):
            N, D, dN, dD, d2N, d2D = vp_derivative_sums(*args, cand[k])
            losses[k], grads[k], hessians[k] = obj.vp_loss_derivatives(
                N, D, dN, dD, d2N, d2D, weights, sp.energy)
        self.evaluations += K
        return to_host(losses, "derivatives"), grads, hessians  # one download on a device

    def misfit_terms(
        self, spectra: Spectra, candidate: np.ndarray, names: tuple[str, ...] = JOINT,
    ) -> obj.MisfitTerms:
        sp = self._life.live(spectra)
        geometry, kg = sp.part.geometry, sp.part.kernel
        self.evaluations += 1
        if kg is None or names != JOINT:
            return self.reference.misfit_terms(sp, geometry, candidate, names)
        # The derivative kernel's per-lobe sums already hold every frequency's terms.
        vp_derivative_sums: Any = _kernels().vp_derivative_sums
        cand = np.ascontiguousarray(candidate, dtype=np.float64).reshape(N_JOINT)
        N, D, dN, dD, d2N, d2D = vp_derivative_sums(*self._kernel_args(sp, kg, 1), cand)
        return obj.vp_misfit_terms(N, D, dN, dD, d2N, d2D, obj.lobe_weights(geometry.weights),
                                   sp.energy, JOINT.index("C10"))

    # -- reconstruction ----------------------------------------------------------------
    def reconstruct(
        self, spectra: Spectra, params: dict[str, float], upsample: int = 1,
        method: str = "ssb", resident: bool = False, bf_pixels: int | None = None,
        crop: Bounds | None = None,
    ) -> np.ndarray:
        sp = self._life.live(spectra)
        check_method(method)
        keep = nearest_bf_pixels(self.geo.bf, bf_pixels)
        if sp.part.kernel is None or has_higher_order(params):
            image = self.reference.reconstruct(sp, sp.part.geometry, params, upsample, method,
                                               keep)
        else:
            f = int(upsample)
            O = self.object_spectrum(sp, params, f, method, keep)
            image = self.reference.object_spectrum_to_image(sp, O, f).astype(np.complex64)
        image = cropped(image, crop)
        # Host memory is resident here; the hand-over is counted where a device engine
        # downloads (livessb.xp: the guard counts on the CPU what the GPU would wait for).
        return image if resident else to_host(image, "reconstruct")

    def reconstruct_many(self, spectra: Spectra, params: Sequence[dict[str, float]],
                         upsample: int = 1, method: str = "ssb") -> list[np.ndarray]:
        return [self.reconstruct(spectra, p, upsample, method, resident=True) for p in params]

    def object_spectrum(self, spectra: Spectra, params: dict[str, float], upsample: int,
                        method: str, keep: np.ndarray | None = None) -> np.ndarray:
        """O(ν) (complex128) on the f-times finer half plane by the Numba kernel (six joint
        parameters); the reference's ``ssb_spectrum``/Wiener spectrum is what it matches.
        ``keep`` (B,) bool: the BF pixels that enter the sums (None: all)."""
        sp = self._life.live(spectra)
        part, f = sp.part, int(upsample)
        kg = part.kernel
        assert kg is not None, "object_spectrum needs the kernels (kernels=True)"
        if f not in part.fine:  # the f-times finer half plane (rotation-independent)
            part.fine[f] = self._fine_frequencies(sp, f)
        fine = part.fine[f]
        C, N, D = _kernels().reconstruction_sums(
            sp.G.T, kg.k_r, kg.k_c, kg.a_k, fine.nu_r, fine.nu_c,
            self._pack(kg, f, fine.nu_r, fine.nu_c), fine.alias, fine.alias_conj,
            self._geo_for(f), np.pi * self.geo.wavelength, to_vector(params, JOINT, default=0.0),
            RECON_EPS, self._det_r, self._det_c, self._row_off, self._col_off, kg.to_det,
            self._all_pixels if keep is None else keep)
        n = sp.n_bf if keep is None else int(np.count_nonzero(keep))
        out: np.ndarray = C / n if method == "ssb" else N / (D + WIENER_EPS * n)
        return out

    def _fine_frequencies(self, sp: HostSpectra, f: int) -> FineFrequencies:
        g = sp.part.geometry
        if f == 1:  # the spectra's own half plane, each frequency its own column
            M = int(g.nu_r.size)
            return FineFrequencies(g.nu_r, g.nu_c, np.arange(M, dtype=np.int64),
                                   np.zeros(M, dtype=bool))
        nu_r, nu_c, index, conj = self.reference.fine_frequencies(sp, f)
        return FineFrequencies(nu_r, nu_c, index.astype(np.int64), conj.astype(bool))

    def _kernel_args(self, sp: HostSpectra, kg: KernelGeometry, f: int) -> tuple[Any, ...]:
        g = sp.part.geometry
        return (sp.G.T, kg.k_r, kg.k_c, kg.a_k, g.nu_r, g.nu_c, self._pack(kg, f, g.nu_r, g.nu_c),
                self._geo_for(f), np.pi * self.geo.wavelength)

    def _geo_for(self, f: int) -> np.ndarray:
        """The kernels' geometry constants for the f-times grid (``_trotter_pairs``)."""
        return self._fit_geo if f == 1 else self._aperture

    def _pack(self, kg: KernelGeometry, f: int, nu_r: np.ndarray,
              nu_c: np.ndarray) -> tuple[np.ndarray, ...]:
        """The pairs of the f-times grid for a kernel: its pack, built on the second call at
        this rotation (one call, as a rotation scan makes, finds them as cheaply) when it
        fits PAIR_CACHE_BYTES, other rotations' and windows' packs dropped first if need
        be; else empty arrays: the kernel finds them."""
        if f not in kg.packs:
            kg.uses[f] = kg.uses.get(f, 0) + 1
            if kg.uses[f] >= 2:
                need = pack_bytes(self.n_bf, int(nu_r.size))
                if self._pack_bytes() + need > PAIR_CACHE_BYTES:
                    for other in self._kernel_states():
                        if other is not kg:
                            other.packs.clear()
                            other.uses.clear()
                fits = self._pack_bytes() + need <= PAIR_CACHE_BYTES
                kg.packs[f] = self._build_pack(kg, nu_r, nu_c, f) if fits else None
        pack = kg.packs.get(f)
        return _NO_PACK if pack is None else pack.arrays()

    def _kernel_states(self) -> list[KernelGeometry]:
        """Every live window's kernel geometry: current and stashed rotations."""
        out = []
        for s in self._life.spectra:
            out += [s.part.kernel] + [st[3] for st in s.part.previous.values()]
        return [k for k in out if k is not None]

    def _pack_bytes(self) -> int:
        return sum(p.nbytes for k in self._kernel_states() for p in k.packs.values()
                   if p is not None)

    def _build_pack(self, kg: KernelGeometry, nu_r: np.ndarray, nu_c: np.ndarray,
                    f: int) -> PairPack:
        k = _kernels()
        counts = k.pair_counts(kg.k_r, kg.k_c, kg.a_k, nu_r, nu_c, self._geo_for(f))
        indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        n = int(indptr[-1])
        pack = PairPack(indptr, np.empty(n, dtype=np.int32), np.empty(n), np.empty(n),
                        np.empty(n, dtype=bool))
        k.fill_pack(kg.k_r, kg.k_c, kg.a_k, nu_r, nu_c, self._geo_for(f), *pack.arrays())
        return pack

    # -- lifetime and diagnostics ------------------------------------------------------
    def release(self, spectra: Spectra) -> None:
        sp = self._life.own(spectra)
        self._life.forget(sp)
        sp.G = None
        part = sp.part
        part.geometry.k = None
        part.geometry.grids = []
        part.kernel = None
        part.fine = {}
        part.previous = {}

    def memory_info(self) -> dict[str, Any]:
        arrays: list[Any] = [self._bf_counts] if not self.closed else []
        for s in self._life.spectra:
            part = s.part
            g = part.geometry
            arrays += [s.G, g.nu_r, g.nu_c, g.weights, g.k]
            states = [(g.grids, part.kernel)] + [(st[2], st[3]) for st in part.previous.values()]
            for grids, kernel in states:
                arrays += [a for grid in _kept(grids) for a in vars(grid).values()]
                if kernel is not None:
                    arrays += [kernel.k_r, kernel.k_c, kernel.a_k]
                    arrays += [a for p in kernel.packs.values() if p is not None
                               for a in p.arrays()]
            arrays += [a for fine in part.fine.values() for a in vars(fine).values()]
        return {"live_bytes": int(sum(getattr(a, "nbytes", 0) for a in arrays))}

    def live_spectra(self) -> tuple[Spectra, ...]:
        return tuple(self._life.spectra)

    def spectra_info(self, spectra: Spectra) -> dict[str, int]:
        sp = self._life.own(spectra)
        g, kg = sp.part.geometry, sp.part.kernel
        if kg is not None:
            pairs = int(_kernels().pair_counts(kg.k_r, kg.k_c, kg.a_k, g.nu_r, g.nu_c,
                                               self._geo_for(1)).sum())
        else:
            pairs = sum(int(((grid.amp_minus != 0) | (grid.amp_plus != 0)).sum())
                        for grid in g.grids)
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


def _kernels() -> Any:
    # Imported on first use: compiling (or loading cached) Numba kernels takes seconds.
    from . import cpu_kernels

    return cpu_kernels


def aperture_constants(k_alpha: float, edge_width: float) -> np.ndarray:
    """(k_α, k_α², edge width, inner², outer², 0, 0, 0, 0) for the kernels' aperture: k_α²
    as ``trotter_support`` computes it; inside |q| ≤ k_α - w the soft-edged aperture is 1
    and outside |q| ≥ k_α + w it is 0 (a full edge width from the 0.5 crossing: exact);
    the zeros: no alias orders (``physics.aliases.alias_spacing`` of "kept")."""
    w = float(edge_width)
    inner = k_alpha - w
    return np.array([k_alpha, k_alpha**2, w, inner * inner if inner > 0 else -1.0,
                     (k_alpha + w) ** 2, 0.0, 0.0, 0.0, 0.0])


def _kept(grids: Any) -> list[Any]:
    """The grids of a rotation that are held in memory."""
    return grids.kept() if isinstance(grids, LazyGrids) else list(grids)

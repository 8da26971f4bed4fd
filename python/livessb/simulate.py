"""4D-STEM forward model with known truth (NumPy/SciPy only).

``simulate_4dstem`` builds counts ``I[Rr, Rc, kr, kc]`` of a weak-phase crystal
(SrTiO3-like [001] projection: a square lattice of Gaussian columns) under the
conventions of SPEC §2, and returns them as a :class:`~livessb.Dataset4D`
together with a :class:`SimulationTruth` holding every parameter the forward
model used.

Conventions (the fitting code relies on them):

* NumPy FFT conventions (forward ``exp(-2πi k·r)``). The probe at scan position
  ``R = (i·dr, j·dc)`` is ``p(r - R)``, spectrum ``P(k) exp(-2πi k·R)``,
  ``P(k) = A(k) exp(-iχ(k))`` with χ from :func:`livessb.physics.optics.chi`
  (Krivanek, φ = atan2(q_col, q_row)) and A the aperture with a soft edge one
  detector pixel wide, ``k_α = α/λ``.
* Object: transmission ``t(r) = exp(iσV(r))``, peak phase ``phase_peak_rad``.
  Exit wave ``ψ = p(r - R) t(r)``; intensity ``|FFT ψ|²`` on an Ns×Ns window of
  real-space pixel dx, so the detector pixel is ``dk = 1/(Ns·dx)`` 1/Å and
  ``detector_sampling_mrad = dk·λ·1e3``. The object lives on a fine grid of
  pixel dx; each position takes the window at an integer offset and applies the
  sub-pixel remainder of R as an exact phase ramp on the probe.
* Thick slab (``depth_A`` = t > 0, tilt τ): multislice over
  ``n = ceil(t / slice_A)`` slices. A slice at depth z ∈ [-t/2, t/2] (z grows
  along the beam) sees defocus ``C10 + z`` and holds the projected structure
  shifted laterally by ``z·τ``; C10 refers to the slab mid-plane. Each slice
  transmits ``exp(i(σ/n)V(r - z_i τ))``; between slices the wave is propagated
  with ``exp(-iπλΔz|k|²)`` (forward by Δz adds +Δz to C10).
* Defocus gradient ``(g_r, g_c)`` Å per scan pixel: position (i, j) uses
  ``C10 + g_r (i - (Nr-1)/2) + g_c (j - (Nc-1)/2)``.
* Detector geometry: the pattern is simulated in the scan frame and resampled
  (bilinear) onto the detector: the detector pixel at offset ``k_det`` from the
  BF centre reads the scan-frame pattern at ``k = R(θ)·T·k_det``
  (R = [[cos, -sin], [sin, cos]] on (row, col) vectors, T swaps row/col when
  ``transpose``). The BF centre sits at a sub-pixel position
  ``(Nk_r//2, Nk_c//2) + detector_center_offset_px``.
* Dose: every pattern is normalised to sum 1; ``counts = Poisson(I·dose)``
  drawn with ``np.random.default_rng(seed)`` in scan order; ``dose=None`` gives
  the noiseless normalised patterns (float32).
"""


from __future__ import annotations

import functools
import math
import os
import typing
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.fft
import scipy.sparse

from .dataset import Dataset4D
from .physics import optics
from .physics.geometry import fft_friendly_size

__all__ = ["SimulationTruth", "demo_dataset", "simulate_4dstem"]

Bounds = tuple[int, int, int, int]

# SrTiO3 [001] projection: fractional (row, col) positions and relative column weights.
SRTIO3_BASIS: tuple[tuple[float, float, float], ...] = (
    (0.0, 0.0, 1.0),    # Sr columns
    (0.5, 0.5, 0.75),   # Ti-O columns
    (0.5, 0.0, 0.25),   # O columns
    (0.0, 0.5, 0.25),   # O columns
)


@dataclass
class SimulationTruth:
    """Everything the forward model used.

    ``params`` holds the six fit parameters (``C10`` at the scan centre and the
    slab mid-plane, ``C12``, ``phi12``, ``tilt_row_mrad``, ``tilt_col_mrad``,
    ``depth``) plus any higher-order coefficient that was given.
    """

    params: dict[str, float]
    rotation_deg: float
    transpose: bool
    defocus_gradient: tuple[float, float]
    phase_peak_rad: float
    voltage_kV: float
    semiangle_mrad: float
    scan_step_A: tuple[float, float]
    scan_shape: tuple[int, int]
    detector_shape: tuple[int, int]
    detector_sampling_mrad: float
    bf_center_px: tuple[float, float]
    wavelength_A: float
    sim_window_px: int
    sim_pixel_A: float
    n_slices: int
    slice_thickness_A: float
    dose: float | None
    seed: int
    lattice_A: float
    atom_sigma_A: float
    lattice_origin_A: tuple[float, float]
    basis: tuple[tuple[float, float, float], ...] = SRTIO3_BASIS
    extra: dict[str, Any] = field(default_factory=dict)

    def local_C10(self, bounds: Bounds) -> float:
        """True C10 at the centre of the region ``(r0, r1, c0, c1)`` (stops exclusive).

        The defocus varies linearly across the scan, so this is also the mean
        C10 over the region's positions.
        """
        r0, r1, c0, c1 = (int(b) for b in bounds)
        if not (r1 > r0 and c1 > c0):
            raise ValueError(f"empty region bounds {bounds!r}")
        nr, nc = self.scan_shape
        gr, gc = self.defocus_gradient
        row = 0.5 * (r0 + r1 - 1) - 0.5 * (nr - 1)
        col = 0.5 * (c0 + c1 - 1) - 0.5 * (nc - 1)
        return float(self.params["C10"] + gr * row + gc * col)

    def local_params(self, bounds: Bounds) -> dict[str, float]:
        """``params`` with C10 replaced by :meth:`local_C10` of the region."""
        out = dict(self.params)
        out["C10"] = self.local_C10(bounds)
        return out

    def C10_map(self) -> np.ndarray:
        """True C10 at every scan position, shape ``scan_shape`` (Å)."""
        nr, nc = self.scan_shape
        gr, gc = self.defocus_gradient
        i = np.arange(nr)[:, None] - 0.5 * (nr - 1)
        j = np.arange(nc)[None, :] - 0.5 * (nc - 1)
        return self.params["C10"] + gr * i + gc * j

    def phase(self, rows_A: Any, cols_A: Any) -> np.ndarray:
        """Total projected phase (rad) of the object at positions (Å), thin limit.

        Broadcasts ``rows_A`` against ``cols_A``. This is the σV(r) of the
        transmission function summed over all slices (without slice shifts).
        """
        r = np.asarray(rows_A, dtype=np.float64)
        c = np.asarray(cols_A, dtype=np.float64)
        pot = _lattice_potential_points(
            r, c, self.lattice_A, self.atom_sigma_A, self.lattice_origin_A, self.basis)
        return self.phase_peak_rad * pot / _lattice_peak(
            self.lattice_A, self.atom_sigma_A, self.basis)

    def to_dict(self) -> dict[str, Any]:
        return {
            "params": {k: float(v) for k, v in self.params.items()},
            "rotation_deg": float(self.rotation_deg),
            "transpose": bool(self.transpose),
            "defocus_gradient": [float(g) for g in self.defocus_gradient],
            "phase_peak_rad": float(self.phase_peak_rad),
            "voltage_kV": float(self.voltage_kV),
            "semiangle_mrad": float(self.semiangle_mrad),
            "scan_step_A": [float(s) for s in self.scan_step_A],
            "scan_shape": [int(s) for s in self.scan_shape],
            "detector_shape": [int(s) for s in self.detector_shape],
            "detector_sampling_mrad": float(self.detector_sampling_mrad),
            "bf_center_px": [float(c) for c in self.bf_center_px],
            "wavelength_A": float(self.wavelength_A),
            "sim_window_px": int(self.sim_window_px),
            "sim_pixel_A": float(self.sim_pixel_A),
            "n_slices": int(self.n_slices),
            "slice_thickness_A": float(self.slice_thickness_A),
            "dose": None if self.dose is None else float(self.dose),
            "seed": int(self.seed),
            "lattice_A": float(self.lattice_A),
            "atom_sigma_A": float(self.atom_sigma_A),
            "lattice_origin_A": [float(o) for o in self.lattice_origin_A],
            "basis": [list(b) for b in self.basis],
            "extra": dict(self.extra),
        }


# ----------------------------------------------------------------------------
# Object: separable lattice of Gaussian columns


def _periodic_gauss_1d(x: np.ndarray, x0: float, period: float, sigma: float) -> np.ndarray:
    """Σ_i exp(-(x - x0 - i·period)² / 2σ²), summed over the images that matter."""
    d = np.mod(x - x0, period)
    images = math.ceil(6 * sigma / period) + 1
    out = np.zeros_like(d)
    for i in range(-images, images + 1):
        out += np.exp(-((d - i * period) ** 2) / (2 * sigma * sigma))
    return out


def _lattice_potential_grid(
    rows_A: np.ndarray, cols_A: np.ndarray, a: float, sigma: float,
    origin: Sequence[float], basis: Sequence[tuple[float, float, float]],
) -> np.ndarray:
    """V on the outer grid rows_A × cols_A (unnormalised, separable per basis column)."""
    out = np.zeros((rows_A.size, cols_A.size), dtype=np.float64)
    for fr, fc, w in basis:
        gr = _periodic_gauss_1d(rows_A, origin[0] + fr * a, a, sigma)
        gc = _periodic_gauss_1d(cols_A, origin[1] + fc * a, a, sigma)
        out += w * gr[:, None] * gc[None, :]
    return out


def _lattice_potential_points(
    r: np.ndarray, c: np.ndarray, a: float, sigma: float,
    origin: Sequence[float], basis: Sequence[tuple[float, float, float]],
) -> np.ndarray:
    r, c = np.broadcast_arrays(r, c)
    out = np.zeros(r.shape, dtype=np.float64)
    for fr, fc, w in basis:
        out += (w * _periodic_gauss_1d(r, origin[0] + fr * a, a, sigma)
                * _periodic_gauss_1d(c, origin[1] + fc * a, a, sigma))
    return out


@functools.lru_cache(maxsize=32)
def _lattice_peak(a: float, sigma: float, basis: tuple[tuple[float, float, float], ...]) -> float:
    """Maximum of the (unnormalised) potential over one unit cell."""
    x = np.linspace(0.0, a, 257)
    grid = _lattice_potential_grid(x, x, a, sigma, (0.0, 0.0), basis)
    sites = np.array([[fr * a, fc * a] for fr, fc, _ in basis])
    at_sites = _lattice_potential_points(sites[:, 0], sites[:, 1], a, sigma, (0.0, 0.0), basis)
    peak = max(float(grid.max()), float(at_sites.max()))
    if not peak > 0:
        raise ValueError("the lattice potential is zero everywhere: check the basis weights")
    return peak


# ----------------------------------------------------------------------------
# Detector geometry


def _rotation_transpose(rotation_deg: float, transpose: bool) -> np.ndarray:
    """M = R(θ)·T acting on (row, col) column vectors."""
    th = math.radians(rotation_deg)
    c, s = math.cos(th), math.sin(th)
    rot = np.array([[c, -s], [s, c]])
    # Clean exact multiples of 90° so that the geometry is exact there.
    rot[np.abs(rot) < 1e-12] = 0.0
    if transpose:
        rot = rot @ np.array([[0.0, 1.0], [1.0, 0.0]])
    return rot


def _detector_offsets(detector_shape: tuple[int, int], center: tuple[float, float]) -> np.ndarray:
    nkr, nkc = detector_shape
    kr, kc = np.meshgrid(np.arange(nkr) - center[0], np.arange(nkc) - center[1], indexing="ij")
    return np.stack([kr.ravel(), kc.ravel()])  # (2, Nd)


def _scan_frame_size(detector_shape: tuple[int, int], center: tuple[float, float],
                     m: np.ndarray) -> int:
    """Smallest FFT-friendly even window that holds every detector read with margin."""
    k = m @ _detector_offsets(detector_shape, center)
    half = float(np.abs(k).max())
    # Even 2·3·5-smooth numbers are twice the 2·3·5-smooth ones.
    return 2 * fft_friendly_size(math.ceil(round(half, 9)) + 2)


def _resampling_matrix(detector_shape: tuple[int, int], center: tuple[float, float],
                       m: np.ndarray, ns: int) -> scipy.sparse.csr_matrix:
    """Sparse bilinear map from the fftshifted scan-frame pattern (ns²) to the detector.

    Equivalent to ``scipy.ndimage.map_coordinates(pattern, ns//2 + M k_det, order=1)``
    for reads inside the window (which the window size guarantees).
    """
    k = m @ _detector_offsets(detector_shape, center)
    pos = k + ns // 2
    base = np.floor(pos)
    frac = pos - base
    base = base.astype(np.int64)
    nd = k.shape[1]
    rows, cols, vals = [], [], []
    for dr in (0, 1):
        wr = frac[0] if dr else 1.0 - frac[0]
        for dc in (0, 1):
            wc = frac[1] if dc else 1.0 - frac[1]
            ir = base[0] + dr
            ic = base[1] + dc
            ok = (ir >= 0) & (ir < ns) & (ic >= 0) & (ic < ns) & (wr * wc > 0)
            rows.append(np.nonzero(ok)[0])
            cols.append((ir * ns + ic)[ok])
            vals.append((wr * wc)[ok])
    return scipy.sparse.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(nd, ns * ns))


# ----------------------------------------------------------------------------
# Forward model


def _as_pair(v: Any, name: str) -> tuple[float, float]:
    if np.ndim(v) == 0:
        return (float(v), float(v))
    vals = [float(x) for x in np.asarray(v, dtype=float).ravel()]
    if len(vals) != 2:
        raise ValueError(f"{name} must be a scalar or a (row, col) pair, got {v!r}")
    return (vals[0], vals[1])


def _fft_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 16))


def simulate_4dstem(
    scan_shape: tuple[int, int] = (32, 32),
    detector_shape: tuple[int, int] = (32, 32),
    scan_step_A: float | tuple[float, float] = 0.6,
    voltage_kV: float = 200,
    semiangle_mrad: float = 20,
    aberrations: Mapping[str, float] | None = None,
    depth_A: float = 0.0,
    tilt_mrad: tuple[float, float] = (0.0, 0.0),
    slice_A: float = 10.0,
    defocus_gradient: tuple[float, float] = (0.0, 0.0),
    rotation_deg: float = 0.0,
    transpose: bool = False,
    dose: float | None = None,
    phase_peak_rad: float = 0.2,
    dtype: Any = None,
    seed: int = 0,
    progress: bool = False,
    *,
    lattice_A: float = 3.905,
    atom_sigma_A: float = 0.35,
    lattice_origin_A: tuple[float, float] = (0.9, 1.3),
    basis: Sequence[tuple[float, float, float]] = SRTIO3_BASIS,
    bf_radius_px: float | None = None,
    detector_center_offset_px: tuple[float, float] = (0.3, -0.2),
    batch_size: int | None = None,
) -> tuple[Dataset4D, SimulationTruth]:
    """Simulate a 4D-STEM dataset with known truth (see the module docstring).

    Parameters beyond the contract (keyword-only): ``lattice_A``,
    ``atom_sigma_A``, ``lattice_origin_A`` and ``basis`` (fractional row, col,
    weight) define the crystal; ``bf_radius_px`` the BF disk radius on the
    detector (default 0.24 × the smaller detector side); and
    ``detector_center_offset_px`` the sub-pixel BF centre offset from
    ``(Nk_r//2, Nk_c//2)``.

    Returns ``(Dataset4D, SimulationTruth)``; the dataset carries the exact
    detector sampling (not derived).
    """
    nr, nc = (int(s) for s in scan_shape)
    nkr, nkc = (int(s) for s in detector_shape)
    dr, dc = _as_pair(scan_step_A, "scan_step_A")
    tau_mrad = _as_pair(tilt_mrad, "tilt_mrad")
    grad = _as_pair(defocus_gradient, "defocus_gradient")
    off = _as_pair(detector_center_offset_px, "detector_center_offset_px")
    coeffs = dict(aberrations or {})
    unknown = [k for k in coeffs if k not in optics.ABERRATION_KEYS]
    if unknown:
        raise ValueError(
            f"unknown aberration keys {unknown}: use C10, C12, phi12, ... (tilt and depth "
            "are the tilt_mrad and depth_A arguments)")
    if depth_A < 0:
        raise ValueError(f"depth_A must be >= 0, got {depth_A!r}")
    if slice_A <= 0:
        raise ValueError(f"slice_A must be positive, got {slice_A!r}")
    if dose is not None and not dose > 0:
        raise ValueError(f"dose must be positive or None, got {dose!r}")
    if dtype is None:
        dtype = np.uint16 if dose is not None else np.float32
    dtype = np.dtype(dtype)
    if dose is None and dtype != np.float32:
        raise ValueError("noiseless patterns (dose=None) are float32: pass dtype=None or float32")

    lam = optics.wavelength_A(voltage_kV)
    k_alpha = semiangle_mrad * 1e-3 / lam
    r_bf = float(bf_radius_px) if bf_radius_px is not None else 0.24 * min(nkr, nkc)
    dk = k_alpha / r_bf
    center = (nkr // 2 + off[0], nkc // 2 + off[1])
    mrot = _rotation_transpose(rotation_deg, transpose)
    ns = _scan_frame_size((nkr, nkc), center, mrot)
    dx = 1.0 / (ns * dk)

    # Slices: depth z_i of each slice centre, defocus of the first slice.
    n_slices = max(1, math.ceil(depth_A / slice_A - 1e-9)) if depth_A > 0 else 1
    dz = depth_A / n_slices
    z = -depth_A / 2 + (np.arange(n_slices) + 0.5) * dz
    tau = np.array(tau_mrad) * 1e-3

    C10 = float(coeffs.get("C10", 0.0))
    c10_span = max(abs(grad[0]) * (nr - 1) / 2 + abs(grad[1]) * (nc - 1) / 2, 0.0)
    reach = (abs(C10) + c10_span + depth_A / 2) * semiangle_mrad * 1e-3 + 2.0 / k_alpha
    if reach > 0.45 * ns * dx:
        warnings.warn(
            f"the probe (reach ≈ {reach:.1f} Å) may wrap around the {ns * dx:.1f} Å simulation "
            "window: use a larger detector or less defocus", RuntimeWarning, stacklevel=2)

    # Probe spectrum at the first slice (unshifted, fft order).
    k1 = np.fft.fftfreq(ns, dx)
    qr, qc = np.meshgrid(k1, k1, indexing="ij")
    first = dict(coeffs)
    first["C10"] = C10 + float(z[0])
    p0 = optics.probe_spectrum(qr, qc, lam, k_alpha, dk, first).astype(np.complex64)
    k2 = (qr * qr + qc * qc)
    prop = np.exp(-1j * math.pi * lam * dz * k2).astype(np.complex64) if n_slices > 1 else None

    # Scan positions and their windows on the object grid.
    ii, jj = np.meshgrid(np.arange(nr), np.arange(nc), indexing="ij")
    pos_r = (ii * dr).ravel()
    pos_c = (jj * dc).ravel()
    n_r = np.floor(pos_r / dx).astype(np.int64)
    n_c = np.floor(pos_c / dx).astype(np.int64)
    f_r = pos_r / dx - n_r
    f_c = pos_c / dx - n_c
    delta_c10 = (grad[0] * (ii - 0.5 * (nr - 1)) + grad[1] * (jj - 0.5 * (nc - 1))).ravel()

    # Object grid: pixel u <-> position (u - ns//2)·dx; window of a position starts at n.
    h = ns // 2
    obj_rows = (np.arange(int(n_r.max()) + ns) - h) * dx
    obj_cols = (np.arange(int(n_c.max()) + ns) - h) * dx
    peak = _lattice_peak(float(lattice_A), float(atom_sigma_A), tuple(tuple(b) for b in basis))
    sigma_slice = phase_peak_rad / peak / n_slices
    trans = []
    for zi in z:
        v = _lattice_potential_grid(
            obj_rows - zi * tau[0], obj_cols - zi * tau[1],
            float(lattice_A), float(atom_sigma_A), lattice_origin_A, basis)
        trans.append(np.exp(1j * sigma_slice * v).astype(np.complex64))

    resample = _resampling_matrix((nkr, nkc), center, mrot, ns).astype(np.float32)
    npos = nr * nc
    if batch_size is None:
        batch_size = max(1, (1 << 20) // (ns * ns))
    out = np.empty((npos, nkr * nkc), dtype=dtype)
    rng = np.random.default_rng(seed)
    m_idx = np.arange(ns)
    ramp_k = (-2j * math.pi * dx) * k1  # phase per unit shift (pixels) along each axis
    workers = _fft_workers()
    kshift = np.fft.fftshift

    starts = range(0, npos, batch_size)
    if progress:
        try:
            from tqdm.auto import tqdm
            starts = tqdm(starts, desc="simulate", unit="batch")
        except ImportError:  # pragma: no cover
            pass
    int_max = np.iinfo(dtype).max if dtype.kind in "ui" else None
    for s0 in starts:
        sl = slice(s0, min(s0 + batch_size, npos))
        # Probe centred at R inside its window: shift (h + f) pixels, exact phase ramp.
        ramp_r = np.exp(ramp_k[None, :] * (h + f_r[sl])[:, None]).astype(np.complex64)
        ramp_c = np.exp(ramp_k[None, :] * (h + f_c[sl])[:, None]).astype(np.complex64)
        spec = p0[None] * ramp_r[:, :, None] * ramp_c[:, None, :]
        if grad != (0.0, 0.0):
            spec *= np.exp((-1j * math.pi * lam) * delta_c10[sl, None, None]
                           * k2[None]).astype(np.complex64)
        psi = scipy.fft.ifft2(spec, axes=(-2, -1), workers=workers)
        rows = (n_r[sl, None] + m_idx[None, :])[:, :, None]
        cols = (n_c[sl, None] + m_idx[None, :])[:, None, :]
        for i, t in enumerate(trans):
            psi *= t[rows, cols]
            wave = scipy.fft.fft2(psi, axes=(-2, -1), workers=workers)
            if i < n_slices - 1:
                wave *= prop
                psi = scipy.fft.ifft2(wave, axes=(-2, -1), workers=workers)
        inten = (wave.real * wave.real + wave.imag * wave.imag).astype(np.float32)
        inten = kshift(inten, axes=(-2, -1)).reshape(inten.shape[0], ns * ns)
        det = np.asarray((resample @ inten.T).T, dtype=np.float64)
        det /= det.sum(axis=1, keepdims=True)
        if dose is None:
            out[sl] = det
        else:
            counts = rng.poisson(det * float(dose))
            if int_max is not None and counts.max(initial=0) > int_max:
                raise ValueError(
                    f"counts reach {counts.max()} which overflows {dtype}: use a lower dose "
                    "or dtype=np.uint32")
            out[sl] = counts

    counts4d = out.reshape(nr, nc, nkr, nkc)
    sampling_mrad = dk * lam * 1e3
    ds = Dataset4D(counts4d, voltage_kV=voltage_kV, semiangle_mrad=semiangle_mrad,
                   scan_step_A=(dr, dc), detector_sampling_mrad=sampling_mrad)
    params = {
        "C10": C10,
        "C12": float(coeffs.get("C12", 0.0)),
        "phi12": float(coeffs.get("phi12", 0.0)),
        "tilt_row_mrad": tau_mrad[0],
        "tilt_col_mrad": tau_mrad[1],
        "depth": float(depth_A),
    }
    for key, val in coeffs.items():
        params.setdefault(key, float(val))
    truth = SimulationTruth(
        params=params, rotation_deg=float(rotation_deg), transpose=bool(transpose),
        defocus_gradient=grad, phase_peak_rad=float(phase_peak_rad),
        voltage_kV=float(voltage_kV), semiangle_mrad=float(semiangle_mrad),
        scan_step_A=(dr, dc), scan_shape=(nr, nc), detector_shape=(nkr, nkc),
        detector_sampling_mrad=sampling_mrad, bf_center_px=center, wavelength_A=lam,
        sim_window_px=ns, sim_pixel_A=dx, n_slices=n_slices, slice_thickness_A=dz,
        dose=None if dose is None else float(dose), seed=int(seed),
        lattice_A=float(lattice_A), atom_sigma_A=float(atom_sigma_A),
        lattice_origin_A=_as_pair(lattice_origin_A, "lattice_origin_A"),
        basis=tuple(tuple(float(x) for x in b) for b in basis),  # type: ignore[misc]
        extra={"bf_radius_px": r_bf, "dtype": str(dtype)},
    )
    return ds, truth


# ----------------------------------------------------------------------------
# Embedded demo

DEMO_SETTINGS: dict[str, Any] = {
    "scan_shape": (96, 96),
    "detector_shape": (48, 48),
    "scan_step_A": 0.6,
    "voltage_kV": 200,
    "semiangle_mrad": 20,
    "aberrations": {"C10": -50.0, "C12": 15.0, "phi12": 0.5},
    "depth_A": 0.0,
    "tilt_mrad": (0.0, 0.0),
    "defocus_gradient": (0.0, 0.8),
    "rotation_deg": 12.0,
    "transpose": False,
    "dose": 5e4,
    "phase_peak_rad": 0.2,
    "seed": 2026,
}


@functools.lru_cache(maxsize=1)
def _demo() -> tuple[Dataset4D, SimulationTruth]:
    return simulate_4dstem(**DEMO_SETTINGS)


@typing.overload
def demo_dataset(with_truth: typing.Literal[False] = False) -> Dataset4D: ...
@typing.overload
def demo_dataset(with_truth: typing.Literal[True]) -> tuple[Dataset4D, SimulationTruth]: ...
def demo_dataset(with_truth: bool = False) -> Dataset4D | tuple[Dataset4D, SimulationTruth]:
    """The embedded default dataset (what ``livessb demo`` shows), with known truth.

    96×96 scan (0.6 Å step) × 48×48 detector, uint16 Poisson counts at 5·10⁴
    e⁻/position, 200 kV, 20 mrad, SrTiO3-like weak-phase crystal (0.2 rad peak),
    C10 = -50 Å at the scan centre with a defocus gradient of 0.8 Å per scan
    column (C10 from -88 Å on the left to -12 Å on the right), C12 = 15 Å,
    phi12 = 0.5 rad, depth 0, scan/detector rotation 12°, no transpose.
    Deterministic. Cached in-process: every call returns the *same* objects
    (do not modify their counts in place).
    """
    ds, truth = _demo()
    return (ds, truth) if with_truth else ds

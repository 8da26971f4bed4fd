"""The forward model: probe, (multi)slice exit waves, detector resampling and dose."""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import scipy.fft

from ..dataset import Dataset4D
from ..physics import optics
from .acquisition import (
    Descan,
    beam_current,
    check_descan,
    descan_field,
    pattern_shift_ramps,
)
from .detector import _resampling_matrix, _rotation_transpose, _scan_frame_size
from .lattice import SRTIO3_BASIS, _lattice_peak, _lattice_potential_grid
from .truth import SimulationTruth


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
    descan_px_per_px: Sequence[float] = (0.0, 0.0, 0.0, 0.0),
    descan_offset_px: Sequence[float] = (0.0, 0.0),
    beam_current_fluctuation: float = 0.0,
) -> tuple[Dataset4D, SimulationTruth]:
    """Simulate a 4D-STEM dataset with known truth (see the module docstring).

    Parameters beyond the contract (keyword-only): ``lattice_A``,
    ``atom_sigma_A``, ``lattice_origin_A`` and ``basis`` (fractional row, col,
    weight) define the crystal; ``bf_radius_px`` the BF disk radius on the
    detector (default 0.24 × the smaller detector side); and
    ``detector_center_offset_px`` the sub-pixel BF centre offset from
    ``(Nk_r//2, Nk_c//2)``.

    Imperfect acquisitions (off by default): ``descan_px_per_px = (a_rr, a_rc,
    a_cr, a_cc)`` and ``descan_offset_px`` move the BF disk on the detector by
    ``(a_rr·i' + a_rc·j', a_cr·i' + a_cc·j') + offset`` detector px at the scan
    position (i', j') from the scan centre (an exact sub-pixel shift of the
    exit wave's pattern: ``SimulationTruth.descan_map``);
    ``beam_current_fluctuation = f`` scales the dose of each position by a
    factor uniform in [1 - f, 1 + f] (``truth.extra["beam_current"]``).

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
    descan, descan_off = check_descan(descan_px_per_px, descan_offset_px)
    shifts = (descan_field((nr, nc), descan, descan_off)
              if any(descan) or any(descan_off) else None)
    current = beam_current(nr * nc, beam_current_fluctuation, seed)
    extra_px = 0.0 if shifts is None else float(np.abs(shifts).max()) + 1.0
    ns = _scan_frame_size((nkr, nkc), center, mrot, extra_px)
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
            if shifts is not None and i == n_slices - 1:  # descan: tilt the exit wave
                sh_r, sh_c = pattern_shift_ramps(shifts[sl], mrot, ns)
                psi *= sh_r[:, :, None] * sh_c[:, None, :]
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
            scale = float(dose) if current is None else float(dose) * current[sl, None]
            counts = rng.poisson(det * scale)
            if int_max is not None and counts.max(initial=0) > int_max:
                raise ValueError(
                    f"counts reach {counts.max()} which overflows {dtype}: use a lower dose "
                    "or dtype=np.uint32")
            out[sl] = counts

    counts4d = out.reshape(nr, nc, nkr, nkc)
    sampling_mrad = dk * lam * 1e3
    ds = Dataset4D(counts4d, voltage_kV=voltage_kV, semiangle_mrad=semiangle_mrad,
                   scan_step_A=(dr, dc), detector_sampling_mrad=sampling_mrad,
                   detector_pixels="points")  # each pixel read at its centre
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
        extra=_acquisition_extra(r_bf, dtype, descan, descan_off, current),
    )
    return ds, truth


def _acquisition_extra(r_bf: float, dtype: Any, descan: Descan, offset: tuple[float, float],
                       current: np.ndarray | None) -> dict[str, Any]:
    extra: dict[str, Any] = {"bf_radius_px": r_bf, "dtype": str(dtype)}
    if any(descan) or any(offset):
        extra["descan_px_per_px"] = list(descan)
        extra["descan_offset_px"] = list(offset)
    if current is not None:
        extra["beam_current"] = [float(c) for c in current]
    return extra

"""livessb.simulate against independent facts (physics, geometry, statistics)."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
import scipy.ndimage

import livessb.simulate as sim
from livessb import Dataset4D
from livessb.physics.optics import wavelength_A

SMALL: dict[str, Any] = {"scan_shape": (8, 8), "detector_shape": (32, 32), "scan_step_A": 0.7}


def _sim(**kw: Any) -> tuple[Dataset4D, sim.SimulationTruth]:
    args = dict(SMALL)
    args.update(kw)
    return sim.simulate_4dstem(**args)


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    """Correlation of two vector fields (..., 2) after removing their means."""
    a = a.reshape(-1, 2) - a.reshape(-1, 2).mean(axis=0)
    b = b.reshape(-1, 2) - b.reshape(-1, 2).mean(axis=0)
    return float((a * b).sum() / math.sqrt((a * a).sum() * (b * b).sum()))


# -- counts, dose, calibration ---------------------------------------------------------------


def test_dose_and_normalisation() -> None:
    dose = 2e4
    ds, truth = _sim(dose=dose, aberrations={"C10": 40.0}, seed=3)
    assert ds.counts.dtype == np.uint16
    totals = ds.counts.reshape(64, -1).sum(axis=1, dtype=np.float64)
    # Each total is Poisson(dose): mean within 5 standard errors, spread ~ sqrt(dose).
    assert abs(totals.mean() - dose) < 5 * math.sqrt(dose / totals.size)
    assert 0.5 * math.sqrt(dose) < totals.std() < 2 * math.sqrt(dose)
    assert truth.dose == dose

    ds0, _ = _sim(aberrations={"C10": 40.0}, rotation_deg=25.0)
    assert ds0.counts.dtype == np.float32
    np.testing.assert_allclose(ds0.counts.sum(axis=(2, 3)), 1.0, rtol=1e-5)


@pytest.mark.parametrize("detector", [(32, 32), (48, 48)])
def test_bright_field_radius_centre_and_sampling(detector: tuple[int, int]) -> None:
    ds, truth = _sim(detector_shape=detector, aberrations={"C10": -30.0, "C12": 10.0},
                     dose=1e5, seed=1)
    lam = wavelength_A(200)
    assert abs(lam - 0.025079) < 2e-6
    k_alpha = 20e-3 / lam
    dk = ds.detector_sampling_mrad * 1e-3 / lam  # simulator's exact pixel, 1/Å
    assert abs(ds.bright_field.radius_px - k_alpha / dk) < 0.5
    assert abs(ds.bright_field.center_row - truth.bf_center_px[0]) < 0.1
    assert abs(ds.bright_field.center_col - truth.bf_center_px[1]) < 0.1
    # Default centre is deliberately sub-pixel.
    assert truth.bf_center_px == (detector[0] // 2 + 0.3, detector[1] // 2 - 0.2)
    derived = Dataset4D(ds.counts, voltage_kV=200, semiangle_mrad=20, scan_step_A=0.7)
    assert derived.detector_sampling_derived
    assert abs(derived.detector_sampling_mrad / ds.detector_sampling_mrad - 1) < 0.02
    assert abs(truth.detector_sampling_mrad - ds.detector_sampling_mrad) < 1e-12
    # The real-space pixel and the detector pixel are reciprocal on the simulation window.
    assert abs(truth.sim_pixel_A * truth.sim_window_px * dk - 1) < 1e-9


def test_determinism() -> None:
    a, _ = _sim(dose=1e4, seed=7)
    b, _ = _sim(dose=1e4, seed=7)
    c, _ = _sim(dose=1e4, seed=8)
    np.testing.assert_array_equal(a.counts, b.counts)
    assert not np.array_equal(a.counts, c.counts)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        _sim(aberrations={"defocus": 3.0})
    with pytest.raises(ValueError):
        _sim(dose=None, dtype=np.uint16)
    with pytest.raises(ValueError):
        _sim(depth_A=-1.0)


# -- detector geometry --------------------------------------------------------------------


def test_transpose_swaps_detector_axes() -> None:
    kw = {"aberrations": {"C10": 35.0, "C12": 12.0, "phi12": 0.4},
          "detector_center_offset_px": (0.3, 0.3)}
    a, ta = _sim(**kw)
    b, tb = _sim(transpose=True, **kw)
    assert ta.sim_window_px == tb.sim_window_px
    np.testing.assert_allclose(b.counts, a.counts.swapaxes(2, 3), rtol=1e-5, atol=1e-9)


def test_rotation_by_90_degrees_is_rot90() -> None:
    # Centre on the exact middle of the detector so that rot90 maps it onto itself.
    kw = {"aberrations": {"C10": 35.0, "C12": 12.0, "phi12": 0.4},
          "detector_center_offset_px": (-0.5, -0.5)}
    a, _ = _sim(**kw)
    b, _ = _sim(rotation_deg=90.0, **kw)
    # k = R(90°) k_det = (-k_det_col, k_det_row): detector (a, b) reads scan frame (N-1-b, a).
    np.testing.assert_allclose(b.counts, np.rot90(a.counts, k=-1, axes=(2, 3)),
                               rtol=1e-5, atol=1e-9)


def test_resampling_matches_map_coordinates() -> None:
    theta, transpose = 33.0, True
    m = sim._rotation_transpose(theta, transpose)
    c, s = math.cos(math.radians(theta)), math.sin(math.radians(theta))
    np.testing.assert_allclose(m, np.array([[c, -s], [s, c]]) @ np.array([[0, 1], [1, 0]]))
    det_shape, centre = (20, 24), (10.3, 11.8)
    ns = sim._scan_frame_size(det_shape, centre, m)
    img = np.random.default_rng(0).random((ns, ns))
    w = sim._resampling_matrix(det_shape, centre, m, ns)
    got = (w @ img.ravel()).reshape(det_shape)
    kr, kc = np.meshgrid(np.arange(det_shape[0]) - centre[0],
                         np.arange(det_shape[1]) - centre[1], indexing="ij")
    coords = np.stack([c * kc - s * kr, s * kc + c * kr]) + ns // 2  # R(θ)·(kc, kr)
    want = scipy.ndimage.map_coordinates(img, coords, order=1, mode="constant")
    np.testing.assert_allclose(got, want, atol=1e-12)


# -- physics -----------------------------------------------------------------------------


def test_zero_potential_is_the_aperture() -> None:
    ab = {"C10": 30.0, "C12": 10.0, "phi12": 0.3, "C30": 1e4}
    ds, _ = _sim(aberrations=ab, phase_peak_rad=0.0, defocus_gradient=(1.0, -2.0),
                     detector_center_offset_px=(0.0, 0.0))
    pats = ds.counts.reshape(64, 32, 32).astype(np.float64)
    np.testing.assert_allclose(pats, np.broadcast_to(pats[0], pats.shape), atol=1e-7)
    # |A(k)|², A with a linear edge one pixel wide centred on k_alpha (pixel units here).
    r_alpha = 20.0 / ds.detector_sampling_mrad
    kr, kc = np.meshgrid(np.arange(32) - 16.0, np.arange(32) - 16.0, indexing="ij")
    amp = np.clip(r_alpha - np.hypot(kr, kc) + 0.5, 0.0, 1.0)
    want = amp**2 / (amp**2).sum()
    np.testing.assert_allclose(pats[0], want, atol=1e-6)


def test_thin_limit_of_multislice() -> None:
    kw = {"aberrations": {"C10": -25.0, "C12": 8.0, "phi12": 1.0}, "phase_peak_rad": 0.3}
    thin, t0 = _sim(**kw)
    thick, t1 = _sim(depth_A=1e-4, slice_A=1e-5, tilt_mrad=(10.0, -5.0), **kw)
    assert t0.n_slices == 1 and t1.n_slices == 10
    np.testing.assert_allclose(thick.counts, thin.counts, rtol=0, atol=2e-6 * thin.counts.max())


def test_thick_slab_is_the_sum_of_shifted_defocused_slices() -> None:
    """First-order (weak-object) multislice = mean of thin slices at C10 + z, shifted by z·τ.

    This is the ThickSample model of SPEC §2; it checks the sign of the tilt shift relative
    to the defocus change with depth, independently of the multislice code path. (To first
    order the slab is symmetric under z -> -z, so only that relative sign is observable.)
    """
    c10, depth, tau = 20.0, 60.0, (25.0, -15.0)
    base: dict[str, Any] = {"aberrations": {"C10": c10, "C12": 5.0, "phi12": 0.2},
                            "phase_peak_rad": 0.01, "lattice_A": 3.905, "atom_sigma_A": 0.4}
    origin = np.array((0.9, 1.3))
    thick, tr = _sim(depth_A=depth, slice_A=10.0, tilt_mrad=tau, **base)
    assert tr.n_slices == 6
    flat, _ = _sim(**{**base, "phase_peak_rad": 0.0})
    i0 = flat.counts.astype(np.float64)
    z = -depth / 2 + (np.arange(6) + 0.5) * 10.0

    def slices(sign_z: float, sign_tau: float) -> np.ndarray:
        acc = np.zeros_like(i0)
        for zi in z:
            ab = dict(base["aberrations"], C10=c10 + sign_z * zi)
            shift = sign_tau * zi * np.array(tau) * 1e-3
            ds, _ = _sim(**{**base, "aberrations": ab}, lattice_origin_A=tuple(origin + shift))
            acc += ds.counts - i0
        return acc / len(z)

    got = thick.counts - i0
    err = np.linalg.norm(got - slices(1, 1)) / np.linalg.norm(got)
    assert err < 0.02
    assert np.linalg.norm(got - slices(1, -1)) / np.linalg.norm(got) > 0.3


@pytest.mark.parametrize(("theta", "transpose"), [(0.0, False), (30.0, True), (-110.0, False)])
def test_centre_of_mass_follows_phase_gradient(theta: float, transpose: bool) -> None:
    """NumPy FFT: t = exp(iφ) deflects the beam to k = +∇φ/2π, so COM ∥ +∇φ (scan frame)."""
    kw = {"scan_shape": (16, 16), "scan_step_A": 0.75, "lattice_A": 12.0, "atom_sigma_A": 1.5,
          "basis": ((0.0, 0.0, 1.0),), "phase_peak_rad": 0.05, "aberrations": {"C10": 0.0}}
    ds, truth = _sim(rotation_deg=theta, transpose=transpose, **kw)
    pats = ds.counts.astype(np.float64)
    kr = np.arange(pats.shape[2]) - truth.bf_center_px[0]
    kc = np.arange(pats.shape[3]) - truth.bf_center_px[1]
    tot = pats.sum(axis=(2, 3))
    com_det = np.stack([(pats.sum(axis=3) * kr).sum(axis=2) / tot,
                        (pats.sum(axis=2) * kc).sum(axis=2) / tot], axis=-1)
    # Scan-frame COM: k = R(θ)·T·k_det.
    th = math.radians(theta)
    m = np.array([[math.cos(th), -math.sin(th)], [math.sin(th), math.cos(th)]])
    if transpose:
        m = m @ np.array([[0.0, 1.0], [1.0, 0.0]])
    com = com_det @ m.T * (ds.detector_sampling_mrad * 1e-3 / ds.wavelength_A)  # 1/Å
    # Expected: ∇φ/2π at the probe positions R = (i·dr, j·dc).
    r, c = np.meshgrid(np.arange(16) * 0.75, np.arange(16) * 0.75, indexing="ij")
    h = 1e-3
    grad = np.stack([(truth.phase(r + h, c) - truth.phase(r - h, c)) / (2 * h),
                     (truth.phase(r, c + h) - truth.phase(r, c - h)) / (2 * h)], axis=-1)
    expected = grad / (2 * math.pi)
    assert _corr(com, expected) > 0.9
    # The magnitude agrees too (probe blur only shrinks it a little).
    ratio = np.linalg.norm(com - com.mean((0, 1))) / np.linalg.norm(expected)
    assert 0.6 < ratio < 1.1


def test_defocus_gradient_is_applied_per_position() -> None:
    ab = {"C10": -20.0, "C12": 6.0, "phi12": -0.3}
    grad = (1.5, -3.0)
    ds, truth = _sim(aberrations=ab, defocus_gradient=grad)
    c10 = truth.C10_map()
    assert abs(c10.mean() - ab["C10"]) < 1e-9
    for i, j in [(0, 0), (7, 2), (3, 6)]:
        assert abs(c10[i, j] - (ab["C10"] + grad[0] * (i - 3.5) + grad[1] * (j - 3.5))) < 1e-9
        assert abs(truth.local_C10((i, i + 1, j, j + 1)) - c10[i, j]) < 1e-9
        uniform, _ = _sim(aberrations=dict(ab, C10=float(c10[i, j])))
        np.testing.assert_allclose(ds.counts[i, j], uniform.counts[i, j], atol=1e-7)
    assert abs(truth.local_C10((0, 8, 0, 8)) - ab["C10"]) < 1e-9
    assert abs(truth.local_C10((2, 5, 1, 7)) - c10[2:5, 1:7].mean()) < 1e-9


def test_demo_dataset_truth() -> None:
    ds, truth = sim.demo_dataset(with_truth=True)
    assert sim.demo_dataset() is ds  # cached in-process
    assert ds.counts.dtype == np.uint16 and ds.counts.ndim == 4
    nr, nc = ds.scan_shape
    assert min(nr, nc) >= 64
    left = truth.local_C10((0, nr, 0, nc // 3))
    right = truth.local_C10((0, nr, nc - nc // 3, nc))
    assert abs(left - right) >= 40
    assert -60 <= truth.params["C10"] <= 60
    assert truth.params["depth"] == 0
    for key in ("C10", "C12", "phi12", "tilt_row_mrad", "tilt_col_mrad", "depth"):
        assert key in truth.params
    d = json.loads(json.dumps(truth.to_dict()))
    assert d["rotation_deg"] == truth.rotation_deg and d["params"]["C12"] == truth.params["C12"]
    totals = ds.counts.reshape(nr * nc, -1).sum(axis=1, dtype=np.float64)
    assert truth.dose is not None
    assert abs(totals.mean() / truth.dose - 1) < 0.01
    assert 1e4 <= truth.dose <= 1e5


# -- consistency with the SPEC §2 objective (independent NumPy prototype) ------------------


def _vp_loss(ds: Dataset4D, p: dict, rotation_deg: float, transpose: bool) -> float:
    """SPEC §2 variable-projection loss, written from the SPEC formulas only."""
    from livessb.physics.optics import probe_spectrum

    lam, ka, dk = ds.wavelength_A, ds.k_alpha, ds.detector_pixel_inv_A
    counts = ds.counts.astype(np.float64)
    nr, nc, nkr, nkc = counts.shape
    bf = ds.bright_field
    rr, cc = np.meshgrid(np.arange(nkr) - bf.center_row, np.arange(nkc) - bf.center_col,
                         indexing="ij")
    sel = np.hypot(rr, cc) * dk <= ka
    th = math.radians(rotation_deg)
    m = np.array([[math.cos(th), -math.sin(th)], [math.sin(th), math.cos(th)]])
    if transpose:
        m = m @ np.array([[0.0, 1.0], [1.0, 0.0]])
    k = m @ (np.stack([rr[sel], cc[sel]]) * dk)
    g = np.fft.fft2(counts[:, :, sel], axes=(0, 1))
    vr, vc = np.meshgrid(np.fft.fftfreq(nr, ds.scan_step_A[0]),
                         np.fft.fftfreq(nc, ds.scan_step_A[1]), indexing="ij")
    vr, vc = vr[..., None], vc[..., None]
    kr, kc = k[0], k[1]
    coeffs = {key: p[key] for key in ("C10", "C12", "phi12")}

    def probe(qr: np.ndarray, qc: np.ndarray) -> np.ndarray:
        return probe_spectrum(qr, qc, lam, ka, dk, coeffs)

    k2 = kr**2 + kc**2
    tau = (p["tilt_row_mrad"] * 1e-3, p["tilt_col_mrad"] * 1e-3)
    nt = 2 * math.pi * (vr * tau[0] + vc * tau[1])
    b1 = math.pi * lam * ((kr - vr) ** 2 + (kc - vc) ** 2 - k2) + nt
    b2 = -math.pi * lam * ((kr + vr) ** 2 + (kc + vc) ** 2 - k2) + nt
    s1 = np.sinc(b1 * p["depth"] / 2 / math.pi)  # np.sinc(x) = sin(πx)/(πx)
    s2 = np.sinc(b2 * p["depth"] / 2 / math.pi)
    pk = probe(kr, kc)
    gam = s1 * probe(kr - vr, kc - vc) * np.conj(pk) - s2 * np.conj(probe(kr + vr, kc + vc)) * pk
    num = (np.conj(gam) * g).sum(-1)
    den = (np.abs(gam) ** 2).sum(-1)
    energy = ((np.abs(gam) > 1e-9) * np.abs(g) ** 2).sum(-1)
    num[0, 0], den[0, 0], energy[0, 0] = 0, 1, 0
    return float(1 - (np.abs(num) ** 2 / np.maximum(den, 1e-30)).sum() / energy.sum())


def test_thick_slab_matches_the_spec_objective() -> None:
    ds, truth = sim.simulate_4dstem(
        scan_shape=(24, 24), detector_shape=(32, 32), scan_step_A=0.6,
        aberrations={"C10": -30.0, "C12": 10.0, "phi12": -0.3}, depth_A=120.0,
        tilt_mrad=(10.0, -5.0), phase_peak_rad=0.1, rotation_deg=20.0)
    p = truth.params
    best = _vp_loss(ds, p, 20.0, False)
    assert best < 0.15
    thin = min(_vp_loss(ds, dict(p, depth=0.0, C10=c), 20.0, False) for c in (-70, -50, -30, -10))
    assert best < 0.5 * thin
    assert best < _vp_loss(ds, dict(p, tilt_row_mrad=-10.0, tilt_col_mrad=5.0), 20.0, False) - 0.1
    assert best < _vp_loss(ds, dict(p, C10=-10.0), 20.0, False)
    assert best < _vp_loss(ds, dict(p, C10=-50.0), 20.0, False)
    assert best < _vp_loss(ds, dict(p, depth=60.0), 20.0, False)
    assert _vp_loss(ds, p, 200.0, False) > 0.8  # wrong rotation branch
    assert _vp_loss(ds, p, 20.0, True) > 0.5  # transposed detector

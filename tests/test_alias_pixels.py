"""The BF pixels an alias of an undersampled scan shares (physics.aliases; Session(
alias_pixels="excluded"), docs/bias-matrix.md §2b): which pixels, the CPU kernels against
the NumPy reference, nothing changed where the scan samples the band, the errors' count of
observations, the session option and its record. The fit against the simulator's truth is
in test_abtem_fits.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import livessb
from helpers import abtem_fixture
from livessb.engine.cpu import CPUEngine, HostSpectra
from livessb.physics.aliases import (
    alias_orders,
    alias_spacing,
    fit_support,
    kept_pair_fraction,
)
from livessb.physics.geometry import half_plane_weights, scan_frame_frequencies, trotter_support

K_ALPHA = 0.797  # 20 mrad at 200 kV, 1/Å: the BF band 2k_α = 1.594 1/Å


def test_alias_orders_follow_the_scans_nyquist_against_the_bf_band() -> None:
    assert alias_orders(0.3, K_ALPHA) == 0  # Nyquist 1.67 > 1.594: no alias meets the disc
    assert alias_orders(0.5, K_ALPHA) == 1 and alias_orders(0.6, K_ALPHA) == 1
    assert alias_orders(1.0, K_ALPHA) == 2  # |ν ± 2/step| can still fall below 2k_α
    assert not alias_spacing((0.6, 0.6), K_ALPHA, "kept").any()
    with pytest.raises(ValueError, match="alias_pixels must be one of"):
        alias_spacing((0.6, 0.6), K_ALPHA, "exclude")


@pytest.mark.parametrize("step", [0.5, 0.6, 1.0, 0.3])
def test_a_kept_pixel_lies_in_no_aliass_trotter_and_every_other_one_does(step: float) -> None:
    rng = np.random.default_rng(3)
    k = rng.uniform(-K_ALPHA, K_ALPHA, (400, 2))
    k = k[np.hypot(k[:, 0], k[:, 1]) <= K_ALPHA]
    nu_r, nu_c = (rng.uniform(-0.5 / step, 0.5 / step, 300) for _ in range(2))
    spacing = alias_spacing((step, step), K_ALPHA, "excluded")
    kept = fit_support(k, nu_r, nu_c, K_ALPHA, spacing)
    # Brute force over every order up to 4, more than alias_orders tests.
    shared = np.zeros_like(kept)
    for mr in range(-4, 5):
        for mc in range(-4, 5):
            if mr or mc:
                shared |= trotter_support(k, nu_r + mr / step, nu_c + mc / step, K_ALPHA)
    support = trotter_support(k, nu_r, nu_c, K_ALPHA)
    np.testing.assert_array_equal(kept, support & ~shared)
    if step <= 0.3:
        assert not shared.any()
    else:
        assert (support & shared).any()  # the test has something to leave out


Engines = dict[tuple[str, bool], tuple[CPUEngine, HostSpectra]]


@pytest.fixture(scope="module")
def thin_engines() -> Engines:
    ds = abtem_fixture("srtio3_thin", scan=12)  # 0.6 Å steps: aliased
    out: Engines = {}
    for mode in ("kept", "excluded"):
        for kernels in (True, False):
            e = CPUEngine(ds, kernels=kernels, alias_pixels=mode)
            sp = e.prepare()
            e.set_rotation(sp, 0.3, False)
            out[mode, kernels] = (e, sp)
    return out


CANDIDATES = np.array([[-38.0, 20.0, 0.6, 0.5, -0.3, 3.0], [-45.0, 15.0, 0.5, 0.0, 0.0, 0.0]])


def test_kernels_and_reference_leave_out_the_same_pixels(thin_engines: Engines) -> None:
    (ek, sk), (er, sr) = thin_engines["excluded", True], thin_engines["excluded", False]
    (kk, kks) = thin_engines["kept", True]
    assert sk.energy == pytest.approx(sr.energy, rel=1e-12)
    assert sk.energy < 0.8 * kks.energy  # half the pairs at 0.6 Å steps are left out
    np.testing.assert_allclose(ek.evaluate(sk, CANDIDATES), er.evaluate(sr, CANDIDATES),
                               rtol=1e-12)
    lk, gk, hk = ek.derivatives(sk, CANDIDATES[:1])
    lr, gr, hr = er.derivatives(sr, CANDIDATES[:1])
    np.testing.assert_allclose(lk, lr, rtol=1e-12)
    np.testing.assert_allclose(gk, gr, rtol=1e-9, atol=1e-12 * np.abs(gr).max())
    np.testing.assert_allclose(hk, hr, rtol=1e-8, atol=1e-10 * np.abs(hr).max())
    assert not np.allclose(ek.evaluate(sk, CANDIDATES), kk.evaluate(kks, CANDIDATES))


def test_the_fine_reconstruction_grid_keeps_every_pair(thin_engines: Engines) -> None:
    # Upsampled (Auto on this scan: 2x), the fine grid's alias selection is its own: the
    # option changes the fit's pairs only.
    (ek, sk), (kk, kks) = thin_engines["excluded", True], thin_engines["kept", True]
    p = {"C10": -38.0, "C12": 20.0, "phi12": 0.6}
    np.testing.assert_array_equal(ek.reconstruct(sk, p, upsample=2),
                                  kk.reconstruct(kks, p, upsample=2))


def test_a_scan_that_samples_the_band_is_fitted_as_before() -> None:
    ds = abtem_fixture("sto1_step0p3", scan=16)  # 0.3 Å: no alias meets the disc
    losses = []
    for mode in ("kept", "excluded"):
        e = CPUEngine(ds, alias_pixels=mode)
        sp = e.prepare()
        e.set_rotation(sp, 0.0, False)
        losses.append((sp.energy, e.evaluate(sp, CANDIDATES), e.derivatives(sp, CANDIDATES)[1]))
    assert losses[0][0] == losses[1][0]
    np.testing.assert_array_equal(losses[0][1], losses[1][1])
    np.testing.assert_array_equal(losses[0][2], losses[1][2])


def test_the_errors_count_the_pairs_the_fit_keeps(thin_engines: Engines) -> None:
    # kept_pair_fraction samples pixels and frequency rows; the engine counts every pair.
    (ek, sk), (kk, kks) = thin_engines["excluded", True], thin_engines["kept", True]
    ds = ek.geo
    k = np.ascontiguousarray(scan_frame_frequencies(ds.bf.k_det, 0.3, False))
    spacing = alias_spacing(ds.step, ds.k_alpha, "excluded")
    fraction = kept_pair_fraction(k.tobytes(), len(k), sk.shape, ds.step, ds.k_alpha,
                                  tuple(float(v) for v in spacing))
    w = np.broadcast_to(half_plane_weights(sk.shape[1]),
                        (sk.shape[0], sk.shape[1] // 2 + 1)).ravel()
    from livessb.engine import cpu_kernels as ck

    def weighted_pairs(e: CPUEngine, sp: HostSpectra) -> float:
        kg, g = sp.part.kernel, sp.part.geometry
        assert kg is not None
        return float(np.sum(w * ck.pair_counts(kg.k_r, kg.k_c, kg.a_k, g.nu_r, g.nu_c,
                                               e._geo_for(1))))

    exact = weighted_pairs(ek, sk) / weighted_pairs(kk, kks)
    assert 0.4 < exact < 0.7
    assert fraction == pytest.approx(exact, abs=0.03)


def test_the_session_option_is_recorded_restored_and_checked(tmp_path: Path) -> None:
    ds = abtem_fixture("srtio3_thin", scan=12)
    with pytest.raises(ValueError, match="alias_pixels must be one of"):
        livessb.Session(ds, device="cpu", alias_pixels="exclude")
    path = tmp_path / "cal.json"
    with livessb.Session(ds, device="cpu", alias_pixels="excluded") as s:
        fit = s.fit(trials=40, seed=1, progress=False)
        assert fit.provenance["alias_pixels"] == "excluded"
        s.save_calibration(path)
        image = s.reconstruct(upsample=1).phase_hash()
    with livessb.Session(ds, device="cpu", calibration=path) as s:
        assert s.alias_pixels == "excluded" and s.full_fit is not None
        assert s.reconstruct(upsample=1).phase_hash() == image
    doc = json.loads(path.read_text())
    del doc["full_fit"]["provenance"]["alias_pixels"]  # a file from before the option
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    with livessb.Session(ds, device="cpu", calibration=old) as s:
        assert s.alias_pixels == "kept"
    with livessb.Session(ds, device="cpu") as s:
        assert s.alias_pixels == "kept"  # the default of both engines


def test_the_next_scan_takes_its_own_setting_on_a_new_engine() -> None:
    ds = abtem_fixture("srtio3_thin", scan=12)
    with livessb.Session(ds, device="cpu") as s:
        first = s.diagnostics.engine
        s.load_scan(ds)  # the same settings: the engine stays
        assert s.diagnostics.engine is first and s.alias_pixels == "kept"
        s.load_scan(ds, alias_pixels="excluded")
        engine = s.diagnostics.engine
        assert engine is not first and engine.alias_pixels == "excluded"
        assert s.alias_pixels == "excluded"

"""Aberration maps against the simulator's truth (CPU engine): Session.fit_map, MapResult,
its blended reconstruction, plots, overlay and calibration round trip."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import livessb
from livessb.fit.maps import MapGridError, tile_grid
from livessb.map_blend import auto_density, blend_tiles, hat_weights, refine_tiles
from livessb.maps import MapResult, MapSessionError
from livessb.session import FitRequiredError, SessionClosedError
from livessb.simulate import simulate_4dstem

TRIALS = 40  # fewer than the default 200 to keep the CPU tests short; same code path
HELD = {"depth": 0.0, "tilt_row_mrad": 0.0, "tilt_col_mrad": 0.0}


@pytest.fixture(scope="module")
def demo_map(demo_session: Any, demo_with_truth: Any) -> Any:
    """The fitted demo (C10 gradient 0.8 Å per column) and a 3x3 map of 32² tiles."""
    m = demo_session.fit_map(tile=(32, 32), trials=TRIALS, progress=False)
    return demo_session, m, demo_with_truth[1]


@pytest.fixture(scope="module")
def small() -> Any:
    """A small scan with a defocus gradient along the rows, fitted with depth/tilt held."""
    ds, _ = simulate_4dstem(scan_shape=(40, 40), detector_shape=(32, 32), dose=1e5,
                                seed=3, aberrations={"C10": -40.0, "C12": 6.0, "phi12": 0.2},
                                defocus_gradient=(1.0, 0.0))
    s = livessb.Session(ds, device="cpu")
    s.fit(trials=20, progress=False, fixed=HELD)
    calls: list[tuple[str, int, int]] = []
    m = s.fit_map(tile=(20, 20), step=(20, 10), trials=TRIALS, fixed=HELD,
                  progress=lambda *a: calls.append(a))
    yield s, ds, m, calls
    s.close()


def test_map_recovers_the_demo_defocus_gradient(demo_map: Any) -> None:
    _, m, truth = demo_map
    assert m.shape == (3, 3) and m.params["C10"].shape == (3, 3)
    centres = m.centers_px.reshape(-1, 2)
    design = np.column_stack([np.ones(len(centres)), centres])
    _, slope_row, slope_col = np.linalg.lstsq(design, m.params["C10"].ravel(), rcond=None)[0]
    assert slope_col == pytest.approx(truth.defocus_gradient[1], rel=0.05)
    assert abs(slope_row) < 0.05 * truth.defocus_gradient[1]
    for b, c10 in zip(m.tile_bounds(), m.params["C10"].ravel(), strict=True):
        assert c10 == pytest.approx(truth.local_C10(b), abs=4.0)
    assert np.all(np.abs(m.params["C12"] - truth.params["C12"]) < 2.0)


def _blocks(phase: np.ndarray, true: np.ndarray, block: int) -> list[float]:
    """RMS phase error in each block after removing each image's mean (the SSB phase is
    defined up to a constant)."""
    out = []
    for r in range(0, phase.shape[0], block):
        for c in range(0, phase.shape[1], block):
            a, b = phase[r:r + block, c:c + block], true[r:r + block, c:c + block]
            out.append(float(np.sqrt(np.mean((a - a.mean() - (b - b.mean())) ** 2))))
    return out


def test_map_reconstruction_beats_the_global_fit_in_every_block(demo_map: Any) -> None:
    s, m, truth = demo_map
    rec, glob = m.reconstruct(upsample=1), s.reconstruct(upsample=1)
    assert rec.shape == glob.shape == truth.scan_shape
    step = truth.scan_step_A
    rows, cols = np.meshgrid(np.arange(96) * step[0], np.arange(96) * step[1], indexing="ij")
    true = truth.phase(rows, cols)
    err_map, err_glob = _blocks(rec.phase, true, 32), _blocks(glob.phase, true, 32)
    assert all(a < b for a, b in zip(err_map, err_glob, strict=True)), (err_map, err_glob)
    # Where the global defocus is far from the local one (left and right thirds) by a margin.
    outer = [k for k in range(9) if k % 3 != 1]
    assert all(err_map[k] < 0.93 * err_glob[k] for k in outer)


def test_blending_leaves_no_seam_at_tile_borders(demo_map: Any) -> None:
    """The map and global reconstructions share the object; their phase difference varies
    smoothly (the local correction) — a seam would be a step in it at a tile border."""
    s, m, _ = demo_map
    f = 2
    diff = np.angle(m.reconstruct(upsample=f).object * np.conj(s.reconstruct(upsample=f).object))
    grad = np.hypot(*np.gradient(diff))
    borders = sorted({int(b) * f for b in m.bounds[..., 2:].ravel() if 0 < b < 96})
    at_border = np.mean([grad[:, c - 1:c + 1].mean() for c in borders])
    inside = np.median([grad[:, c].mean() for c in range(grad.shape[1])])
    assert at_border < 1.2 * inside
    # The same test sees a mosaic of unblended tile reconstructions (a seam by design).
    mosaic = s.reconstruct(m.fits[0][0].params, f).object.copy()
    right = s.reconstruct(m.fits[0][2].params, f).object
    mosaic[:, 96:] = right[:, 96:]
    step = np.angle(mosaic * np.conj(s.reconstruct(upsample=f).object))
    g = np.hypot(*np.gradient(step))
    assert g[:, 95:97].mean() > 1.2 * np.median(g.mean(axis=0))


def test_hat_weights_are_a_partition_of_unity() -> None:
    w = hat_weights(np.array([15.5, 47.5, 79.5]), 192, 2)
    assert np.allclose(w.sum(axis=0), 1.0) and np.all(w >= 0)
    assert w[0, 0] == 1.0 and w[2, -1] == 1.0  # clamped beyond the outer centres
    assert w[1, 95] == pytest.approx(1.0)  # output pixel 95 at scan px 47.5
    assert np.allclose(hat_weights(np.array([10.0]), 8, 1), 1.0)


def test_the_blend_is_the_same_whatever_the_tiles_per_batch() -> None:
    """Tiles go to the engine a batch at a time (four per CUDA launch): every batch size
    gives the same bits, each tile's image weighted by its own hats."""
    rng = np.random.default_rng(2)
    tiles = [[{"C10": float(10 * i + j)} for j in range(3)] for i in range(3)]
    images = {p["C10"]: (rng.normal(size=(24, 30)) + 1j * rng.normal(size=(24, 30)))
              .astype(np.complex64) for row in tiles for p in row}
    calls: list[int] = []

    def many(ps: list[dict[str, float]]) -> list[np.ndarray]:
        calls.append(len(ps))
        return [images[p["C10"]] for p in ps]

    rows, cols = np.array([4.0, 12.0, 20.0]), np.array([5.0, 15.0, 25.0])
    out = {b: blend_tiles(many, tiles, rows, cols, (24, 30), 1, batch=b) for b in (1, 4, 9)}
    assert calls == [1] * 9 + [4, 4, 1] + [9]
    assert np.array_equal(out[1], out[4]) and np.array_equal(out[1], out[9])
    w_r, w_c = hat_weights(rows, 24, 1), hat_weights(cols, 30, 1)
    want = sum(np.outer(w_r[i], w_c[j]) * images[tiles[i][j]["C10"]]
               for i in range(3) for j in range(3))
    np.testing.assert_allclose(out[4], want, rtol=1e-5, atol=1e-5)


def test_virtual_tiles_interpolate_the_aberration_not_the_angle_numbers() -> None:
    a = {"C10": -80.0, "C12": 10.0, "phi12": 1.5}
    b = {"C10": -40.0, "C12": 10.0, "phi12": -1.5}  # 0.14 rad from a across the π wrap
    tiles, rows, cols = refine_tiles([[a, b]], np.array([8.0]), np.array([8.0, 24.0]), 2)
    assert cols.tolist() == [8.0, 16.0, 24.0] and rows.tolist() == [8.0]
    mid = tiles[0][1]
    assert mid["C10"] == pytest.approx(-60.0)
    assert abs(abs(mid["phi12"]) - np.pi / 2) < 1e-9  # through the wrap, not through 0
    assert mid["C12"] == pytest.approx(10.0 * np.cos(0.5 * (np.pi - 3.0) * 2), rel=1e-9)
    assert tiles[0][0] == pytest.approx(a) and tiles[0][2] == pytest.approx(b)
    # auto: the demo's 25 Å between tile centres is 1.26 rad of χ at the aperture edge
    ds = livessb.simulate.demo_dataset()
    c = dict(a, phi12=0.5)
    assert auto_density([[c, dict(c, C10=-80.0 + 25.2)]], ds.wavelength_A, ds.k_alpha) == 2
    assert auto_density([[c, dict(c, C10=-78.0)]], ds.wavelength_A, ds.k_alpha) == 1
    assert auto_density([[c, dict(c, C10=400.0)]], ds.wavelength_A, ds.k_alpha) == 4


def test_tiles_and_centres_cover_the_scan() -> None:
    g = tile_grid((96, 100), (32, 40))
    assert g.row_starts == (0, 32, 64) and g.col_starts == (0, 40, 60)  # last on the edge
    over = tile_grid((96, 96), 32, step=16)
    assert over.shape == (5, 5)
    for grid in (g, over):
        covered = np.zeros((96, 100), dtype=int)
        for row in grid.bounds():
            for r0, r1, c0, c1 in row:
                covered[r0:r1, c0:c1] += 1
        n_cols = 100 if grid is g else 96
        assert covered[:, :n_cols].min() >= 1


def test_map_record_centres_fixed_and_progress(small: Any) -> None:
    _, _, m, calls = small
    assert m.shape == (2, 3)
    assert calls[0] == ("map", 0, 6) and calls[-1] == ("map", 6, 6)
    assert m.centers_px[1, 2].tolist() == [29.5, 29.5]
    assert m.bounds[1, 2].tolist() == [20, 40, 20, 40]
    for row in m.fits:
        for fit in row:
            assert all(fit.params[k] == v for k, v in HELD.items())
            assert fit.provenance["fixed"] == HELD
    for k in HELD:
        assert np.all(m.params[k] == 0.0) and np.all(m.errors[k] == 0.0)
    # errors of free parameters: the fit's, where it reports them (NaN until then)
    free = [getattr(f, "errors", {}).get("C10", np.nan) for f in m.fits[0]]
    assert np.allclose(m.errors["C10"][0], free, equal_nan=True)
    # the defocus gradient runs along the rows here
    assert m.params["C10"][1].mean() - m.params["C10"][0].mean() == pytest.approx(20.0, abs=5)


def test_overlay_and_plot(small: Any) -> None:
    m = small[2]
    rec = json.loads(json.dumps(m.overlay("C10"), allow_nan=False))
    assert rec["unit"] == "Å" and rec["label"] == "C10" and rec["grid_shape"] == list(m.shape)
    assert len(rec["bounds"]) == m.shape[0] and len(rec["values"][0]) == m.shape[1]
    assert json.loads(json.dumps(m.overlay("depth")))["fixed"] is True
    with pytest.raises(KeyError, match="no map"):
        m.overlay("C99")
    fig = m.plot(["C10", "depth"])
    assert len(fig.axes) >= 4
    assert "(fixed)" in fig.axes[2].get_title() or "(fixed)" in fig.axes[-1].get_title()


def test_calibration_round_trips_the_map_without_refitting(small: Any, tmp_path: Any) -> None:
    s, ds, m, _ = small
    path = s.save_calibration(tmp_path / "cal.json")
    with livessb.Session(ds, device="cpu", calibration=path) as s2:
        assert s2.evaluations == 0  # nothing refitted
        back = s2.maps[-1]
        assert back.shape == m.shape and back.fixed == m.fixed
        for name in m.params:
            assert np.array_equal(back.params[name], m.params[name])
            assert np.array_equal(back.errors[name], m.errors[name], equal_nan=True)
        assert np.array_equal(back.losses, m.losses)
        a, b = back.reconstruct(upsample=1, density=1), m.reconstruct(upsample=1, density=1)
        assert np.array_equal(a.object, b.object)
    doc = json.loads(path.read_text())
    doc.pop("maps")  # a file written before maps existed
    path.write_text(json.dumps(doc))
    with livessb.Session(ds, device="cpu", calibration=path) as s3:
        assert s3.maps == []
    assert MapResult.from_dict(m.to_dict()).params.keys() == m.params.keys()


def test_bad_map_input_gives_clear_errors(small: Any) -> None:
    s, ds, m, _ = small
    for tile, step, message in (((64, 64), None, "larger than the 40x40 scan"),
                                (0, None, "positive"), ((-4, 8), None, "positive"),
                                (8, 0, "positive"), (8, -2, "positive"),
                                (8, 12, "exceeds the tile"), (2, None, "smaller than"),
                                ((8.5, 8), None, "whole scan positions")):
        with pytest.raises(MapGridError, match=message):
            s.fit_map(tile=tile, step=step, progress=False)
    with pytest.raises(ValueError, match="density"):
        s.reconstruct_map(m, density=0)
    with livessb.Session(ds, device="cpu") as fresh:
        with pytest.raises(FitRequiredError, match="fit"):
            fresh.fit_map(tile=20, progress=False)
    detached = MapResult.from_dict(m.to_dict())
    with pytest.raises(MapSessionError, match="reconstruct_map"):
        detached.reconstruct()


def test_reconstruct_after_close_says_so() -> None:
    ds = simulate_4dstem(scan_shape=(16, 16), detector_shape=(24, 24), dose=1e5, seed=1,
                         aberrations={"C10": 20.0})[0]
    s = livessb.Session(ds, device="cpu")
    s.fit(trials=8, progress=False, fixed=HELD)
    m = s.fit_map(tile=8, trials=8, fixed=HELD, progress=False)
    s.close()
    assert m.params["C10"].shape == (2, 2)  # the record stays valid
    with pytest.raises(SessionClosedError, match="closed"):
        m.reconstruct()


def test_benchmark_map_workload_runs_on_the_cpu(tmp_path: Any) -> None:
    from livessb.bench.runner import run_benchmark

    out = tmp_path / "bench.json"
    doc = run_benchmark(out, scan=(24, 24), detector=(32, 32), runs=1, trials=12, seed=3,
                        device="cpu", map_tiles=2)
    assert json.loads(out.read_text())["workload"]["map_tiles"] == 2
    for op in ("map_fit", "map_reconstruct", "map_reconstruct_density1", "map_total"):
        assert doc["times_s"][op]["all"][0] > 0
    assert doc["vs_target"]["map_total"]["target_s"] == 1.5  # issue 19's map target
    stages = doc["stages"][0]
    assert stages["map_grid"] == [2, 2] and stages["map_tile"] == [12, 12]
    assert stages["map"]["tiles"] == 4.0 and stages["map_reconstruction_shape"][0] >= 24
    assert set(doc["fits"][0]["map"]) == {"C10_gradient_row_col", "C10_rms_vs_truth",
                                          "losses_sum"}

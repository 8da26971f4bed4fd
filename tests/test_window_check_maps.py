"""The window check on the tiles of a map (fit.window_check through fit.region.fit_window):
in a "hann" session every tile is compared with its unapodised fit, in an "auto" session
each tile reports the window its own check advises, and the map's record counts them; a
default session's tiles are not checked."""

from __future__ import annotations

import pytest

import livessb
from livessb.cli_map import summary_lines
from livessb.maps import MapResult
from livessb.simulate import simulate_4dstem

P = {"C10": -60.0, "C12": 8.0, "phi12": 0.4}
TILE = (16, 16)


@pytest.fixture(scope="module")
def maps() -> dict[str, MapResult]:
    # Low dose, no lattice: where the Hann has nothing to remove its errors are larger,
    # so the checks advise "none" on some tiles at least (as on the full field, §10).
    ds, _ = simulate_4dstem(scan_shape=(32, 32), detector_shape=(32, 32), scan_step_A=0.25,
                            aberrations=P, dose=2e4, seed=5)
    out = {}
    for window in ("none", "hann", "auto"):
        with livessb.Session(ds, device="cpu", scan_window=window) as s:
            s.fit(trials=60, seed=1, progress=False)
            out[window] = s.fit_map(tile=TILE, trials=100, seed=3, progress=False)
    return out


def test_every_tile_of_a_hann_map_is_checked_and_counted(maps: dict[str, MapResult]) -> None:
    m = maps["hann"]
    tiles = [f for row in m.fits for f in row]
    checks = [f.provenance["window_check"] for f in tiles]
    assert len(checks) == 4
    assert all(c["reported"] == "hann" for c in checks)
    summary = m.provenance["window_check"]
    assert summary == {
        "tiles": 4, "checked": 4, "leakage": sum(c["leakage"] for c in checks),
        "recommended_none": sum(c["recommended"] == "none" for c in checks),
        "reported_none": 0}
    assert summary["recommended_none"] >= 1  # the data the check was measured to advise on
    for f, c in zip(tiles, checks, strict=True):  # the Hann fit is reported, the check kept
        assert f.params["C10"] != c["unapodised"]["C10"]
        assert abs(c["unapodised"]["C10"] - f.params["C10"]) < 3 * f.errors["C10"]
    assert "window check" not in "\n".join(summary_lines(maps["none"], 1.0))
    assert "window_check" not in maps["none"].provenance
    assert all("window_check" not in f.provenance for row in maps["none"].fits for f in row)


def test_an_auto_map_reports_each_tiles_advised_fit(maps: dict[str, MapResult]) -> None:
    hann, auto = maps["hann"], maps["auto"]
    for row_h, row_a in zip(hann.fits, auto.fits, strict=True):
        for fh, fa in zip(row_h, row_a, strict=True):
            check = fa.provenance["window_check"]
            assert check["recommended"] == fh.provenance["window_check"]["recommended"]
            if check["recommended"] == "none":
                assert check["reported"] == "none" and fa.params == check["unapodised"]
                assert fa.errors["C10"] < fh.errors["C10"]
            else:
                assert check["reported"] == "hann" and fa.params == fh.params
    summary = auto.provenance["window_check"]
    assert summary["reported_none"] == summary["recommended_none"] >= 1
    text = "\n".join(summary_lines(auto, 1.0))
    assert f"'none' suits {summary['recommended_none']}" in text
    assert "unapodised fits are reported" in text
    # the per-tile records survive the map's record
    again = MapResult.from_dict(auto.to_dict())
    assert again.provenance["window_check"] == summary
    assert again.fits[0][0].provenance["window_check"]["reported"] == \
        auto.fits[0][0].provenance["window_check"]["reported"]

"""``livessb fit``'s preprocessing flags: descan model, dose normalisation, bad detector
pixels (found, listed, from a mask file); what they reach in the session, the summary, the
JSON and the calibration file; clear errors in the command line's words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import livessb.simulate as sim
from livessb.cli import main

DESCAN = (0.02, 0.05, -0.04, 0.03)  # detector px per scan px: (rr, rc, cr, cc)
HOT = (14, 17)  # inside the BF disk of the 32×32 detector
SMALL: dict[str, Any] = {"scan_shape": (24, 24), "detector_shape": (32, 32), "scan_step_A": 0.6,
         "aberrations": {"C10": -30.0}, "dose": 2e4, "seed": 5, "descan_px_per_px": DESCAN}


@pytest.fixture(scope="module")
def scan(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A simulated scan with descan and a hot pixel, and the flags its calibration needs."""
    ds, _ = sim.simulate_4dstem(**SMALL)
    counts = ds.counts.copy()
    counts[:, :, HOT[0], HOT[1]] = 20 * counts.max()
    path = tmp_path_factory.mktemp("cli_pre") / "scan.npy"
    np.save(path, counts)
    cal = ["--voltage-kV", str(ds.voltage_kV), "--semiangle-mrad", str(ds.semiangle_mrad),
           "--scan-step-A", "0.6", "--detector-sampling-mrad", str(ds.detector_sampling_mrad),
           "--device", "cpu", "--trials", "8", "--seed", "1"]
    return path, cal


def _fit(scan: tuple[Path, list[str]], out: Path, *flags: str) -> dict[str, Any]:
    path, cal = scan
    assert main(["fit", str(path), *cal, "--quiet", "--json", str(out), *flags]) == 0
    return dict(json.loads(out.read_text())["preprocessing"])


def _pixels(record: dict[str, Any]) -> set[tuple[int, int]]:
    return {(int(r), int(c)) for r, c in record["bad_pixels"]}


def test_defaults_fit_the_descan_plane_and_find_the_hot_pixel(scan: Any, tmp_path: Path,
                                                              capsys: Any) -> None:
    path, cal = scan
    cal_file = tmp_path / "cal.json"
    assert main(["fit", str(path), *cal, "--json", str(tmp_path / "fit.json"),
                 "--save-calibration", str(cal_file)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("preprocessing:"))
    assert "descan plane: span" in line and "applied" in line and "not applied" not in line
    assert "dose normalisation off" in line and "found automatically" in line
    pre = json.loads((tmp_path / "fit.json").read_text())["preprocessing"]
    assert pre["options"]["descan"] == "plane" and pre["descan_applied"]
    slopes = pre["descan"]["px_per_px"]  # detector px per scan px
    assert np.allclose(slopes, DESCAN, atol=0.003), slopes  # the simulator's truth
    assert HOT in _pixels(pre) and pre["found_pixels"] >= 1
    assert not pre["options"]["dose_normalise"] and pre["options"]["find_bad_pixels"]
    # the calibration file records the same corrections...
    saved = json.loads(cal_file.read_text())["preprocessing"]
    assert _pixels(saved) == _pixels(pre) and saved["descan"] == pre["descan"]
    # ...and a restore without preprocessing flags reuses them (nothing re-measured)
    restored = _fit(scan, tmp_path / "restored.json", "--calibration", str(cal_file))
    assert _pixels(restored) == _pixels(pre) and restored["descan"] == pre["descan"]


def test_flags_choose_model_dose_and_pixels(scan: Any, tmp_path: Path) -> None:
    mask = np.ones((32, 32), dtype=np.uint8)
    mask[HOT] = 0  # 0/1 integers, 0 = bad: the user knows the hot pixel
    np.save(tmp_path / "mask.npy", mask)
    pre = _fit(scan, tmp_path / "a.json", "--descan", "smooth", "--descan-degree", "2",
               "--dose-normalize", "--no-auto-mask", "--mask-pixels", "3,4;5, 6",
               "--mask-pixels", "9,10", "--detector-mask", str(tmp_path / "mask.npy"),
               "--save-calibration", str(tmp_path / "cal.json"))
    opts = pre["options"]
    assert (opts["descan"], opts["smooth_degree"]) == ("smooth", 2)
    assert pre["descan"]["degree"] == 2 and pre["descan_applied"]
    assert opts["dose_normalise"] is True and opts["find_bad_pixels"] is False
    # exactly the user's pixels: the search is off (nothing found)
    assert _pixels(pre) == {(3, 4), (5, 6), (9, 10), HOT} and pre["found_pixels"] == 0
    assert json.loads((tmp_path / "cal.json").read_text())["preprocessing"]["options"] == opts
    off = _fit(scan, tmp_path / "b.json", "--descan", "off", "--calibration",
               str(tmp_path / "cal.json"))  # a flag with --calibration: measured afresh
    assert off["options"]["descan"] is None and off["descan"] is None
    assert not off["descan_applied"] and HOT in _pixels(off)


def _error(capsys: Any, *argv: str) -> str:
    code = main(list(argv))
    assert code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return str(captured.err)


@pytest.mark.parametrize(("flags", "words"), [
    (["--mask-pixels", "12;40"], "--mask-pixels '12;40': '12' is not ROW,COL"),
    (["--mask-pixels", "1,-2"], "is not ROW,COL (two non-negative integers)"),
    (["--descan-degree", "2"], "--descan-degree applies to --descan smooth"),
    (["--descan", "smooth", "--descan-degree", "7"], "--descan-degree must be 1..5, got 7"),
    (["--detector-mask", "nothere.npy"], "--detector-mask nothere.npy: no such file"),
    (["--mask-pixels", "40,1"], "--mask-pixels 40,1 lies outside the 32x32 detector"),
])
def test_bad_values_name_the_flag(scan: Any, tmp_path: Path, capsys: Any, flags: list[str],
                                  words: str) -> None:
    path, cal = scan
    err = _error(capsys, "fit", str(path), *cal, "--quiet", "--json",
                 str(tmp_path / "o.json"), *flags)
    assert words in err, err
    for keyword in ("detector_mask", "smooth_degree", "dose_normalise", "Traceback"):
        assert keyword not in err
    assert not (tmp_path / "o.json").exists()


def test_mask_file_checked_against_the_detector_as_loaded(scan: Any, tmp_path: Path,
                                                          capsys: Any) -> None:
    path, cal = scan
    np.save(tmp_path / "full.npy", np.ones((32, 32), dtype=bool))
    err = _error(capsys, "fit", str(path), *cal, "--quiet", "--bin-detector", "2",
                 "--detector-mask", str(tmp_path / "full.npy"))
    assert "has shape (32, 32); the detector as loaded is (16, 16) (after --bin-detector)" in err
    np.save(tmp_path / "levels.npy", np.full((32, 32), 2, dtype=np.int16))
    err = _error(capsys, "fit", str(path), *cal, "--detector-mask", str(tmp_path / "levels.npy"))
    assert "need bools or 0/1 (True = use the pixel), got dtype int16 with values [2]" in err
    (tmp_path / "text.npy").write_text("not an array")
    err = _error(capsys, "fit", str(path), *cal, "--detector-mask", str(tmp_path / "text.npy"))
    assert "is not a NumPy .npy array" in err


def test_typo_in_a_choice_is_refused_by_the_parser(scan: Any, capsys: Any) -> None:
    path, cal = scan
    with pytest.raises(SystemExit) as info:
        main(["fit", str(path), *cal, "--descan", "plain"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --descan: invalid choice: 'plain'" in err
    assert "'plane', 'smooth', 'off'" in err

"""``livessb map`` on a small simulated dataset whose defocus varies along the columns
(known truth per tile), its restore from a calibration, and its refusals: a typo'd flag, a
tile or scan region bigger than the scan, a step bigger than the tile, a missing output
folder (the folder rule shared with ``fit`` and the widget)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import livessb
from livessb.cli import main
from livessb.simulate import simulate_4dstem

TRIALS = "24"
C10_TOLERANCE_A = 4.0  # 12×12 tiles at dose 2e5, 24 trials (the fitted errors: ≈ 1.3 Å)


@pytest.fixture(scope="module")
def scan(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, livessb.simulate.SimulationTruth]:
    ds, truth = simulate_4dstem(scan_shape=(24, 24), detector_shape=(32, 32), dose=2e5, seed=4,
                                aberrations={"C10": 40.0, "C12": 8.0, "phi12": -0.3},
                                defocus_gradient=(0.0, 1.0))  # 1 Å per column
    path = tmp_path_factory.mktemp("map") / "scan.npy"
    np.save(path, ds.counts)
    return path, truth


def _cal(path: Path) -> list[str]:
    return [str(path), "--voltage-kV", "200", "--semiangle-mrad", "20", "--scan-step-A", "0.6",
            "--device", "cpu", "--trials", TRIALS, "--seed", "3"]


def test_map_writes_json_png_and_calibration_near_the_truth(
        scan: tuple[Path, livessb.simulate.SimulationTruth],
        capsys: pytest.CaptureFixture[str]) -> None:
    path, truth = scan
    out = path.parent
    assert main(["map", *_cal(path), "--tile", "12", "12", "--json", str(out / "map.json"),
                 "--png", str(out / "map.png"), "--save-calibration", str(out / "cal.json")]) == 0
    text = capsys.readouterr().out
    assert "map: 2×2 tiles of 12×12 positions (step 12×12)" in text
    assert "wrote " in text and "map.json" in text
    doc = json.loads((out / "map.json").read_text())
    m = doc["map"]
    assert m["grid_shape"] == [2, 2] and m["tile"] == [12, 12] and m["step"] == [12, 12]
    assert m["units"]["C10"] == "Å"
    for i in range(2):
        for j in range(2):
            want = truth.local_C10(tuple(m["bounds"][i][j]))
            assert abs(m["params"]["C10"][i][j] - want) < C10_TOLERANCE_A, (i, j, want)
            assert m["errors"]["C10"][i][j] > 0
    # the gradient along the columns (12 Å between tile centres), not along the rows
    c10 = np.array(m["params"]["C10"])
    assert (c10[:, 1] - c10[:, 0]).min() > 6.0
    assert np.abs(c10[1] - c10[0]).max() < C10_TOLERANCE_A
    assert (out / "map.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ds = livessb.load(path, voltage_kV=200, semiangle_mrad=20, scan_step_A=0.6)
    with livessb.Session(ds, device="cpu", calibration=out / "cal.json") as s:
        assert len(s.maps) == 1
        assert s.maps[0].params["C10"].tolist() == m["params"]["C10"]


def test_map_from_a_restored_calibration_fits_no_full_field(
        scan: tuple[Path, livessb.simulate.SimulationTruth],
        capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = scan
    out = path.parent
    assert main(["fit", *_cal(path), "--quiet", "--save-calibration",
                 str(out / "full.json")]) == 0
    assert main(["map", str(path), "--device", "cpu", "--trials", TRIALS, "--calibration",
                 str(out / "full.json"), "--tile", "12", "24", "--step", "6", "24",
                 "--json", str(out / "restored.json")]) == 0
    text = capsys.readouterr().out
    assert "full field (restored)" in text and "map: 3×1 tiles of 12×24 positions" in text
    doc = json.loads((out / "restored.json").read_text())
    assert doc["map"]["grid_shape"] == [3, 1]
    assert [b[0] for b in doc["map"]["bounds"]] == [[0, 12, 0, 24], [6, 18, 0, 24],
                                                    [12, 24, 0, 24]]


@pytest.mark.parametrize(("args", "message"), [
    (["--tile", "30", "30"], "--tile 30 30 is larger than the 24x24 scan: use --tile 24 24 or "
                             "smaller (or livessb fit for the full field)"),
    (["--tile", "12", "12", "--step", "20", "20"], "--step 20 20 exceeds the --tile 12 12"),
    (["--tile", "2", "2"], "--tile 2 2 is smaller than the 4x4 positions a fit needs"),
    (["--tile", "12", "12", "--scan-region", "0", "30", "0", "24"],
     "--scan-region 0 30 0 24 is empty or outside the 24x24 scan"),
    (["--json", "x.json"], "--tile R C is required"),
    (["--tile", "12", "12", "--json"], "--json FILE is required"),  # (the last: dropped)
])
def test_map_refuses_a_grid_that_cannot_work_before_fitting(
        scan: tuple[Path, livessb.simulate.SimulationTruth], capsys: pytest.CaptureFixture[str],
        args: list[str], message: str) -> None:
    path, _ = scan
    target = path.parent / "refused.json"
    if args[-1] == "--json":  # no --json at all
        args = args[:-1]
    elif "--json" not in args:
        args = [*args, "--json", str(target)]
    assert main(["map", *_cal(path), *args]) == 2
    err = capsys.readouterr().err
    assert "livessb map: error: " in err and message in err, err  # (after the loading bar)
    assert "full field" not in capsys.readouterr().out  # refused before the full-field fit
    assert not target.exists()


def test_map_output_folder_must_exist(
        scan: tuple[Path, livessb.simulate.SimulationTruth],
        capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = scan
    missing = path.parent / "no-such-folder"
    for flag in ("--json", "--png", "--save-calibration"):
        files = {"--json": str(path.parent / "ok.json"), flag: str(missing / "x")}
        extra = [a for f, v in files.items() for a in (f, v)]
        assert main(["map", *_cal(path), "--tile", "12", "12", *extra]) == 2
        err = capsys.readouterr().err
        assert (f"{flag} {missing / 'x'}: the folder {str(missing)!r} does not exist (livessb "
                "creates no folders): create it first or choose another path") in err, err
    assert not missing.exists() and not (path.parent / "ok.json").exists()


def test_a_typo_in_a_map_flag_names_the_flag_it_meant(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ex:
        main(["map", "scan.npy", "--tiles", "12", "12", "--json", "m.json"])
    assert ex.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: livessb map")
    assert "--tiles (did you mean --tile?)" in err


def test_benchmark_output_folder_must_exist_before_it_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "results" / "bench.json"
    assert main(["benchmark", "--json", str(missing), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert (f"--json {missing}: the folder {str(missing.parent)!r} does not exist (livessb "
            "creates no folders)") in err, err
    assert not missing.parent.exists()

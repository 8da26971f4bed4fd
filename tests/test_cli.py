"""The livessb command line: fit on a file, headless demo (real runs, small data)."""

import json
import subprocess
import sys

import numpy as np

from livessb.cli import main
from livessb.simulate import simulate_4dstem


def test_fit_command_writes_json_png_and_calibration(tmp_path) -> None:  # type: ignore[no-untyped-def]
    ds, _ = simulate_4dstem(scan_shape=(24, 24), detector_shape=(32, 32), dose=2e5, seed=4,
                                aberrations={"C10": 40.0, "C12": 8.0, "phi12": -0.3})
    np.save(tmp_path / "scan.npy", ds.counts)
    out = tmp_path / "fit.json"
    args = [str(tmp_path / "scan.npy"), "--json", str(out), "--voltage-kV", "200",
            "--semiangle-mrad", "20", "--scan-step-A", "0.6", "--detector-sampling-mrad",
            str(ds.detector_sampling_mrad), "--device", "cpu", "--quiet",
            "--region", "0", "12", "0", "24", "--png", str(tmp_path / "crop.png"),
            "--save-calibration", str(tmp_path / "cal.json")]
    assert main(["fit", *args]) == 0
    doc = json.loads(out.read_text())
    assert abs(doc["full_field"]["params"]["C10"] - 40.0) < 3.0
    assert doc["region"]["bounds"] == [0, 12, 0, 24]
    assert (tmp_path / "crop.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Restoring the saved calibration reproduces the crop without fitting.
    out2 = tmp_path / "fit2.json"
    restore = [a if a != str(out) else str(out2) for a in args]
    restore = [*restore[:restore.index("--region")], "--calibration", str(tmp_path / "cal.json")]
    assert main(["fit", *restore]) == 0
    assert json.loads(out2.read_text())["full_field"]["params"] == doc["full_field"]["params"]


def test_fit_command_reports_missing_calibration(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    ds, _ = simulate_4dstem(scan_shape=(8, 8), detector_shape=(32, 32), seed=1)
    np.save(tmp_path / "scan.npy", ds.counts)
    code = main(["fit", str(tmp_path / "scan.npy"), "--json", str(tmp_path / "o.json")])
    assert code == 2
    assert "voltage_kV is missing" in capsys.readouterr().err
    assert not (tmp_path / "o.json").exists()


def test_headless_demo_end_to_end(tmp_path) -> None:  # type: ignore[no-untyped-def]
    proc = subprocess.run(
        [sys.executable, "-m", "livessb.cli", "demo", "--headless", "--device", "cpu",
         "--out", str(tmp_path)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert abs(summary["full_field"]["rotation_error_deg"]) < 1.0
    for region in summary["regions"].values():
        assert abs(region["C10_error_A"]) < 3.0
    left, right = summary["regions"]["left"], summary["regions"]["right"]
    assert right["params"]["C10"] - left["params"]["C10"] > 40
    for name in ("full_phase.png", "region_left.png", "region_right.png", "calibration.json"):
        assert (tmp_path / name).stat().st_size > 0

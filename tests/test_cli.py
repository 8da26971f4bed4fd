"""The livessb command line: fit on a file, headless demo (real runs, small data)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from livessb.cli import main
from livessb.simulate import simulate_4dstem


def test_fit_command_writes_json_png_and_calibration(tmp_path: Path) -> None:
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
    restored = json.loads(out2.read_text())
    assert restored["full_field"]["params"] == doc["full_field"]["params"]
    # The restore lists every region the file holds (here the one fitted with --region).
    [(rid, saved)] = restored["regions_restored"].items()
    assert rid == "r1" and saved["bounds"] == [0, 12, 0, 24]
    assert saved["params"] == doc["region"]["params"]
    # ... and takes the calibration values from the file: no calibration flags needed.
    out3 = tmp_path / "fit3.json"
    assert main(["fit", str(tmp_path / "scan.npy"), "--device", "cpu", "--quiet", "--json",
                 str(out3), "--calibration", str(tmp_path / "cal.json")]) == 0
    assert json.loads(out3.read_text())["phase_sha256"] == json.loads(
        out2.read_text())["phase_sha256"]


def test_a_missing_file_is_named_before_missing_values(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["fit", str(tmp_path / "scna.npy")])  # a typo'd name, no values either
    assert code == 2
    err = capsys.readouterr().err
    assert "no such file" in err and "scna.npy" in err
    assert "missing --voltage-kV" not in err


def test_a_mistyped_flag_names_the_flag_it_meant(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ex:
        main(["fit", "scan.npy", "--voltage-kv", "200", "--semiangel-mrad", "20", "--zzz"])
    assert ex.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: livessb fit")  # the subcommand's usage, not the top level's
    assert "--voltage-kv (did you mean --voltage-kV?)" in err  # the case
    assert "--semiangel-mrad (did you mean --semiangle-mrad?)" in err  # two letters swapped
    assert "--zzz\n" in err or err.rstrip().endswith("--zzz")  # nothing near: no guess
    with pytest.raises(SystemExit):
        main(["--quiet", "fit", "scan.npy"])  # a fit flag before the command name
    assert "--quiet (it goes after the command: livessb fit ... --quiet)" in capsys.readouterr().err


def test_fit_command_reports_missing_calibration(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ds, _ = simulate_4dstem(scan_shape=(8, 8), detector_shape=(32, 32), seed=1)
    np.save(tmp_path / "scan.npy", ds.counts)
    code = main(["fit", str(tmp_path / "scan.npy"), "--json", str(tmp_path / "o.json")])
    assert code == 2
    err = capsys.readouterr().err
    assert "missing --voltage-kV, --semiangle-mrad, --scan-step-A" in err  # all at once
    assert "voltage_kV" not in err  # the flag, not the Python keyword
    assert not (tmp_path / "o.json").exists()


def test_headless_demo_end_to_end(tmp_path: Path) -> None:
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


def _cli(
        *args: str, cwd: Path | None = None,
        umask: int | None = None) -> subprocess.CompletedProcess:
    import os

    def pre() -> None:
        if umask is not None:
            os.umask(umask)
    return subprocess.run([sys.executable, "-m", "livessb.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600, preexec_fn=pre)


def test_version_and_help_name_units_defaults_and_exclusive_stops() -> None:
    import livessb

    proc = _cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"livessb {livessb.__version__}"
    text = " ".join(_cli("fit", "--help").stdout.split())
    for words in ("beam energy in kV", "semiangle in mrad", "scan step in Å",
                  "mrad per detector pixel", "stops exclusive", "exclusive stops",
                  "(default: 200)", "(default: auto", "--force", "--quiet"):
        assert words in text, words


def test_summary_umask_and_no_unasked_folders(tmp_path: Path) -> None:
    ds, _ = simulate_4dstem(scan_shape=(16, 16), detector_shape=(32, 32), dose=2e5, seed=4,
                            aberrations={"C10": 40.0})
    np.save(tmp_path / "scan.npy", ds.counts)
    cal = ["--voltage-kV", "200", "--semiangle-mrad", "20", "--scan-step-A", "0.6",
           "--device", "cpu", "--trials", "16"]
    proc = _cli("fit", "scan.npy", *cal, "--png", "phase.png", "--save-calibration", "cal.json",
                cwd=tmp_path, umask=0o022)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    # concise: the dataset, the fit with its loss and each parameter with its unit
    assert len(out) < 2000, out
    assert "16×16 scan, 32×32 detector" in out and "full field: loss" in out
    for line in ("C10 ", "C12 ", "phi12 ", "tilt_row_mrad ", "depth "):
        assert line in out, line
    assert " Å" in out and " mrad" in out and "wrote phase.png, cal.json" in out
    assert not (tmp_path / "fit.json").exists()  # --json is optional
    for name in ("phase.png", "cal.json"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o644, name  # the user's umask
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cal.json", "phase.png", "scan.npy"]
    # --quiet: nothing on stdout, no progress bar on stderr
    quiet = _cli("fit", "scan.npy", *cal, "--quiet", "--json", "q.json", cwd=tmp_path,
                 umask=0o027)
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == "", quiet.stderr
    assert (tmp_path / "q.json").stat().st_mode & 0o777 == 0o640
    # an output folder that does not exist is refused up front, not created
    bad = _cli("fit", "scan.npy", *cal, "--png", "out/phase.png", cwd=tmp_path)
    assert bad.returncode == 2 and "--png out/phase.png: the folder 'out' does not exist" in (
        bad.stderr)
    assert not (tmp_path / "out").exists()


def test_summary_shows_errors_and_box_edges() -> None:
    from livessb.cli_text import fit_lines
    from livessb.results import FitResult

    fit = FitResult(params={"C10": -48.7, "C12": 100.0}, loss=0.25, rotation_deg=12.0,
                    transpose=False, on_box_edge=["C12"])
    fit.errors = {"C10": 0.4}
    lines = fit_lines("full field", fit)
    assert lines[0] == "full field: loss 0.25, rotation 12.000°"
    assert lines[1].split() == ["C10", "-48.70", "±", "0.40", "Å"]
    assert lines[2].split() == ["C12", "100.00", "Å"]
    assert "C12 ended on the edge of the search box" in lines[3]
    # the thin model kept: the thick-only parameters read "not determined", and why
    thin = FitResult(params={"C10": -48.7, "depth": 0.0}, loss=0.25, rotation_deg=12.0,
                     transpose=False, errors={"C10": 0.4, "depth": 0.0},
                     undetermined=["depth"],
                     provenance={"model_choice": {"kept": "thin", "reason": "not significant"}})
    lines = fit_lines("full field", thin)
    assert lines[1] == "  model: thin (not significant)"
    assert lines[3].split() == ["depth", "not", "determined"]
    # the thick model kept but its depth not a depth (fit.systematic): the reason is shown
    why = "depth and tilt not determined: they explain 4.14% of the sideband energy"
    thick = FitResult(params={"C10": -48.7, "depth": 118.0}, loss=0.34, rotation_deg=0.0,
                      transpose=False, errors={"C10": 20.0, "depth": 9.6},
                      undetermined=["depth"],
                      provenance={"model_choice": {"kept": "thick", "reason": "significant"},
                                  "warnings": [why, "C12 = 1.6 ± 1.6 Å: ..."]})
    lines = fit_lines("full field", thick)
    assert lines[3].split() == ["depth", "not", "determined"]
    assert lines[4] == f"  why: {why}" and len(lines) == 5


def test_summary_names_the_model_settings_that_are_not_the_defaults() -> None:
    from livessb.cli_text import fit_lines
    from livessb.results import FitResult

    def fit(**provenance: object) -> FitResult:
        return FitResult(params={"C10": 80.8}, loss=0.3, rotation_deg=0.0, transpose=False,
                         errors={"C10": 0.5}, provenance=dict(provenance))

    plain = fit(scan_window="none", alias_pixels="kept", scan_frequencies="effective")
    assert not any("settings" in line for line in fit_lines("full field", plain))
    both = fit(scan_window="hann", alias_pixels="excluded", scan_frequencies="effective",
               noise={"design": 1.944**2})
    lines = fit_lines("full field", both)
    assert lines[1] == "  settings: scan window hann (errors ×1.94), alias pixels excluded"
    assert fit_lines("full field", fit(scan_frequencies="grid"))[1] == (
        "  settings: scan frequencies grid")


@pytest.mark.parametrize("window", ["hann", "auto"])
def test_a_hann_fit_prints_its_window_check(tmp_path: Path, window: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    ds, _ = simulate_4dstem(scan_shape=(24, 24), detector_shape=(32, 32), dose=2e4, seed=4,
                            scan_step_A=0.25, aberrations={"C10": 40.0})
    np.save(tmp_path / "scan.npy", ds.counts)
    assert main(["fit", str(tmp_path / "scan.npy"), "--voltage-kV", "200", "--semiangle-mrad",
                 "20", "--scan-step-A", "0.25", "--device", "cpu", "--trials", "50",
                 "--scan-window", window]) == 0
    out = capsys.readouterr().out.splitlines()
    [line] = [x for x in out if "window check" in x]
    assert line.startswith("  window check: scan_window='hann' changed no parameter beyond")
    assert line.endswith({"hann": "scan_window='none' suits these data",
                          "auto": "it is the one reported (scan_window='auto')"}[window])
    if window == "auto":
        assert "  settings: scan window auto (reported none)" in out

"""livessb.series on a simulated time series (8 scans of 40² × 32², defocus drifting by
+2 Å and the specimen by (0.15, -0.1) Å per scan) over a LocalCluster of 2 worker
processes: fitted defocus against the truth, bits against a serial loop over Session,
a worker killed mid-series, a rerun, the average, the CLI with bad input."""

from __future__ import annotations

import json
import math
import os
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from distributed import Client, LocalCluster

from livessb import Session
from livessb.cli import main
from livessb.export_hdf5 import save_dataset_emd
from livessb.series import drift_corrected_average, fit_series
from livessb.series.average import shifted
from livessb.simulate import simulate_4dstem

N_SCANS = 8
DRIFT_C10_A = 2.0
DRIFT_ORIGIN_A = (0.15, -0.1)
HELD = ("C12", "phi12")


def simulate_scan(k: int, scan: int = 40) -> Any:
    return simulate_4dstem(
        scan_shape=(scan, scan), detector_shape=(32, 32), scan_step_A=0.6,
        voltage_kV=200, semiangle_mrad=20,
        aberrations={"C10": -60.0 + DRIFT_C10_A * k, "C12": 10.0, "phi12": 0.5},
        rotation_deg=12.0, dose=1e5, seed=100 + k,
        lattice_origin_A=(0.9 + DRIFT_ORIGIN_A[0] * k, 1.3 + DRIFT_ORIGIN_A[1] * k))


@pytest.fixture(scope="module")
def scans(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[Any]]:
    folder = tmp_path_factory.mktemp("series_in")
    paths, truths = [], []
    for k in range(N_SCANS):
        ds, truth = simulate_scan(k)
        paths.append(str(save_dataset_emd(ds, folder / f"scan_{k}.emd")))
        truths.append(truth)
    return paths, truths


@pytest.fixture(scope="module")
def client() -> Any:
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def series(scans: tuple[list[str], list[Any]], client: Any,
           tmp_path_factory: pytest.TempPathFactory) -> Any:
    out = tmp_path_factory.mktemp("series_out")
    return fit_series(scans[0], client=client, fixed=HELD, out=out, average=True,
                      device="cpu", progress=False)


@pytest.fixture(scope="module")
def serial(scans: tuple[list[str], list[Any]], tmp_path_factory: pytest.TempPathFactory
           ) -> list[tuple[dict[str, float], str]]:
    """The same series as a plain loop over Session, in this process."""
    import livessb

    cal = tmp_path_factory.mktemp("serial") / "reference.json"
    out = []
    with Session(livessb.load(scans[0][0], progress=False), device="cpu") as s:
        ref = s.fit(progress=False)
        s.save_calibration(cal)
        out.append((ref.params, s.reconstruct(ref.params).phase_hash()))
    held = {n: ref.params[n] for n in HELD}
    start = {n: v for n, v in ref.params.items() if n not in held}
    for path in scans[0][1:]:
        with Session(livessb.load(path, progress=False), device="cpu", calibration=cal,
                     force=True) as s:
            fit = s.refine(start, fixed=held)
            out.append((fit.params, s.reconstruct(fit.params).phase_hash()))
    return out


def test_series_defocus_within_errors_of_truth(series: Any, scans: Any) -> None:
    assert [r["status"] for r in series.records] == ["done"] * N_SCANS
    assert series.reference == 0 and series.records[0]["mode"] == "reference"
    c10, err = series.values("C10"), series.errors("C10")
    truth = np.array([t.params["C10"] for t in scans[1]])
    assert np.all(err > 0) and np.all(np.abs(c10 - truth) <= 2 * err), (c10, err, truth)
    assert np.all(np.diff(c10) > 0)  # the drift is seen scan by scan
    for r in series.records[1:]:  # what was reused, said in the record
        assert r["mode"] == "warm"
        assert r["reused"]["rotation_deg"] == series.records[0]["rotation_deg"]
        assert r["reused"]["fixed"] == {n: series.records[0]["params"][n] for n in HELD}
        assert r["params"]["C12"] == series.records[0]["params"]["C12"]
        assert r["reused"]["start_from"].startswith("reference scan")


def test_series_identical_to_serial_loop(series: Any, serial: Any) -> None:
    for record, (params, phase_hash) in zip(series.records, serial, strict=True):
        assert record["params"] == params
        assert record["phase_sha256"] == phase_hash
    assert len({r["pid"] for r in series.records}) == 2  # both workers took scans
    # One resident session per worker, moved from scan to scan (Session.load_scan): the
    # bits above are those of a new Session per scan.
    for pid in {r["pid"] for r in series.records}:
        mine = [r for r in series.records if r["pid"] == pid]
        assert [r["session"] for r in mine] == ["resident"] * len(mine)
        assert sorted(r["session_scan"] for r in mine) == list(range(1, len(mine) + 1))
        assert {r["sessions_opened"] for r in mine} == {1}
    assert max(r["session_scan"] for r in series.records) > 1


def test_series_files_written(series: Any) -> None:
    scans_dir = series.out / "scans"
    for r in series.records:
        on_disk = json.loads((scans_dir / f"{r['index']:04d}-scan_{r['index']}.json").read_text())
        assert on_disk["params"] == r["params"] and on_disk["fit"]["params"] == r["params"]
        assert (scans_dir / on_disk["outputs"]["reconstruction"]).is_file()
    summary = json.loads((series.out / "series.json").read_text())
    assert summary["status"] == "complete" and summary["counts"]["done"] == N_SCANS
    assert not list(scans_dir.glob(".*.tmp"))


def test_series_average_registers_the_drift(series: Any) -> None:
    avg = series.average
    assert avg["status"] == "done" and avg["n"] == N_SCANS
    step = 0.6 / series.records[0]["upsample"]
    expected = [(-DRIFT_ORIGIN_A[0] * k / step, -DRIFT_ORIGIN_A[1] * k / step)
                for k in range(N_SCANS)]
    np.testing.assert_allclose(avg["shifts_px"], expected, atol=0.3)
    # Signal left in the differences (defocus fitted ±0.5 Å) only lowers the gain.
    assert 0.8 < avg["snr_gain_ratio"] < 1.1, avg
    assert (series.out / "average.emd").is_file()


def test_average_gain_on_noise_only_differences() -> None:
    """One smooth image, independent noise per copy, known sub-pixel drifts: the shifts
    come back and the SNR gain is √N within 10 %."""
    from scipy.ndimage import gaussian_filter

    rng = np.random.default_rng(7)
    # A smooth random specimen, periodic over the field (a Fourier shift moves it exactly).
    base = gaussian_filter(rng.normal(size=(96, 96)), 3.0, mode="wrap")
    base /= base.std()
    drift = [(0.37 * k, -0.23 * k) for k in range(N_SCANS)]
    images = [shifted(base, (-dr, -dc)) + rng.normal(0, 0.3, base.shape) for dr, dc in drift]
    avg = drift_corrected_average(images)
    np.testing.assert_allclose(avg.shifts_px, drift, atol=0.1)
    assert abs(avg.snr_gain / math.sqrt(N_SCANS) - 1) < 0.10, avg.snr_gain


def test_rerun_skips_finished_scans(series: Any, scans: Any, client: Any) -> None:
    stamps = {p: p.stat().st_mtime_ns for p in (series.out / "scans").iterdir()}
    again = fit_series(scans[0], client=client, fixed=HELD, out=series.out, device="cpu",
                       progress=False)
    assert again.kept == list(range(N_SCANS))
    assert [r["params"] for r in again.records] == [r["params"] for r in series.records]
    assert {p: p.stat().st_mtime_ns for p in (series.out / "scans").iterdir()} == stamps


def test_worker_killed_mid_series(series: Any, scans: Any, client: Any,
                                  tmp_path: Path) -> None:
    killed: dict[str, Any] = {}

    def kill_a_busy_worker(record: dict[str, Any], done: int, total: int) -> None:
        if killed or record["role"] == "reference":
            return
        busy = {w: keys for w, keys in client.processing().items() if keys}
        if not busy:
            return
        worker = sorted(busy)[0]
        pid = client.run(os.getpid, workers=[worker])[worker]
        killed.update(worker=worker, pid=pid, keys=list(busy[worker]))
        os.kill(pid, signal.SIGKILL)

    again = fit_series(scans[0], client=client, fixed=HELD, out=tmp_path, device="cpu",
                       progress=kill_a_busy_worker)
    assert killed["keys"], "no worker was busy when one was killed"
    assert [r["status"] for r in again.records] == ["done"] * N_SCANS
    assert [r["params"] for r in again.records] == [r["params"] for r in series.records]
    assert [r["phase_sha256"] for r in again.records] == [
        r["phase_sha256"] for r in series.records]
    client.wait_for_workers(2, timeout=60)  # the nanny restarts it for the next tests
    time.sleep(0.5)


def test_warm_start_from_previous_scan(scans: Any, client: Any, tmp_path: Path) -> None:
    chained = fit_series(scans[0][:4], client=client, fixed=HELD, warm_start="previous",
                         out=tmp_path, device="cpu", progress=False)
    truth = [t.params["C10"] for t in scans[1][:4]]
    for k, r in enumerate(chained.records[1:], start=1):
        assert r["reused"]["start_from"] == f"scan {k - 1}"
        assert abs(r["params"]["C10"] - truth[k]) <= 2 * r["errors"]["C10"]


def test_cli_series_typo_corrupt_and_mismatched(scans: Any, client: Any, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    paths = scans[0]
    typo = paths[1].replace("scan_1", "scna_1")
    corrupt = tmp_path / "corrupt.emd"
    corrupt.write_bytes(b"not an HDF5 file: a copy that broke off")
    other, _ = simulate_scan(0, scan=32)
    mismatched = save_dataset_emd(other, tmp_path / "other_scan.emd")
    out = tmp_path / "out"
    rc = main(["series", paths[0], typo, str(corrupt), str(mismatched), paths[2],
               "--out", str(out), "--scheduler", client.scheduler.address, "--fix",
               "C12,phi12", "--quiet", "--device", "cpu"])
    text = capsys.readouterr().out
    assert rc == 1, text
    assert "no such file; did you mean" in text and "scan_1.emd" in text
    summary = json.loads((out / "series.json").read_text())
    status = {s["index"]: s["status"] for s in summary["scans"]}
    assert status == {0: "done", 1: "missing", 2: "failed", 3: "mismatched", 4: "done"}
    errors = {s["index"]: s.get("error", "") for s in summary["scans"]}
    assert "HDF5" in errors[2] and "corrupt" in errors[2]
    assert "shape [32, 32, 32, 32] differs" in errors[3]
    assert "2 of 5 scans done" in text


def test_cli_series_bad_input(scans: Any, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["series", scans[0][0], "--out", str(tmp_path), "--fix", "C13"])
    assert rc == 2 and "cannot hold ['C13'] fixed" in capsys.readouterr().err
    rc = main(["series", str(tmp_path / "nothing.emd"), "--out", str(tmp_path)])
    assert rc == 2 and "no scan to fit" in capsys.readouterr().err
    rc = main(["series", scans[0][0], "--out", str(tmp_path), "--scheduler",
               "tcp://127.0.0.1:9", "--workers", "2"])
    assert rc == 2 and "drop one of the two" in capsys.readouterr().err

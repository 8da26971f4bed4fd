"""Series throughput (issue 22): ``fit_series`` on one worker against a serial loop over
``Session`` doing the same work (reference full fit, then each scan warm-started:
restored rotation + Newton from the reference's fit with C12/phi12 held; EMD + JSON
written per scan), on scans read from files on disk.

CPU (CI-sized, committed record):
    python benchmarks/series_throughput.py --device cpu --json benchmarks/results/series-cpu.json
One H200, SPEC §4 workload (512² scan, 192² detector, uint16; counts generated on the
device by livessb.bench.device_data with the defocus drifting 2 Å per scan, written to
.npy files first):
    python benchmarks/series_throughput.py --device cuda --workload spec --data /tmp/series \
        --json $OUT/series-h200.json
A SPEC scan is 18 GiB: ``--files`` distinct files are written (default: as many as the
disk holds with 4 GiB to spare, at most --scans) and the scans cycle over them; every
file is dropped from the page cache (posix_fadvise) before each pass, so the first read
of each file in a pass comes from the disk (a file read again in the same pass may come
from the cache: the record says how many files there were). The same pattern runs in
both passes. Reported: wall time and scans/s of each pass (the reference fit included),
and per scan the seconds of load (reading + mean pattern), open (BF counts gathered onto
the engine), fit, reconstruct and write.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from livessb import __version__
from livessb.bench.report import device_name, git_commit, versions

CAL = {"voltage_kV": 200.0, "semiangle_mrad": 20.0}
HELD = ("C12", "phi12")
SPARE_BYTES = 4 * 2**30


def write_npy(counts: Any, path: Path, rows_per_write: int = 8) -> float:
    """Write counts (host or CuPy) as .npy row block by row block; seconds."""
    t0 = time.perf_counter()
    out = np.lib.format.open_memmap(path, mode="w+", dtype=counts.dtype, shape=counts.shape)
    for r in range(0, counts.shape[0], rows_per_write):
        block = counts[r:r + rows_per_write]
        out[r:r + rows_per_write] = block.get() if hasattr(block, "get") else block
    out.flush()
    del out
    evict([path])
    return time.perf_counter() - t0


def evict(paths: list[Path]) -> None:
    """Drop the files from the page cache (the next read comes from the disk)."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def make_files(args: argparse.Namespace, folder: Path) -> tuple[list[Path], dict[str, Any]]:
    folder.mkdir(parents=True, exist_ok=True)
    info: dict[str, Any] = {}
    if args.workload == "spec":
        from livessb.bench.device_data import generate_dataset
        from livessb.bench.workload import ABERRATIONS, SCAN_STEP_A

        rows = cols = args.scan_px
        per_file = rows * cols * 192 * 192 * 2
        free = shutil.disk_usage(folder).free
        n = args.files or max(1, min(args.scans, (free - SPARE_BYTES) // per_file))
        info.update(scan=[rows, cols], detector=[192, 192], dtype="uint16", step_A=SCAN_STEP_A,
                    file_bytes=per_file, disk_free_bytes=free)
        paths, times = [], []
        for k in range(n):
            ds, _ = generate_dataset(scan=(rows, cols), aberrations={**ABERRATIONS,
                                                  "C10": ABERRATIONS["C10"] + 2.0 * k},
                                     seed=42 + k)
            p = folder / f"spec_{k}.npy"
            times.append(write_npy(ds.counts.device_array, p))
            paths.append(p)
            del ds
        info["scan_step_A"] = SCAN_STEP_A
    else:
        from livessb.simulate import simulate_4dstem

        n = args.files or args.scans
        info.update(scan=[64, 64], detector=[40, 40], dtype="uint16", scan_step_A=0.6)
        paths, times = [], []
        for k in range(n):
            ds, _ = simulate_4dstem(scan_shape=(64, 64), detector_shape=(40, 40),
                                    scan_step_A=0.6, aberrations={
                                        "C10": -60.0 + 2.0 * k, "C12": 10.0, "phi12": 0.5},
                                    rotation_deg=12.0, dose=1e5, seed=100 + k)
            p = folder / f"cpu_{k}.npy"
            times.append(write_npy(ds.counts, p))
            paths.append(p)
    info.update(files=len(paths), write_s=times)
    return [paths[k % len(paths)] for k in range(args.scans)], info


def serial_pass(paths: list[Path], out: Path, args: argparse.Namespace,
                load_options: dict[str, Any]) -> tuple[float, list[dict[str, float]]]:
    """The loop a user would write: the series' per-scan Session calls, in this process."""
    from livessb.series.sources import ScanSource
    from livessb.series.store import SeriesStore
    from livessb.series.warm import FitPlan, fit_from, fit_reference, held_values
    from livessb.series.worker import load_scan

    store = SeriesStore(out)
    plan = FitPlan(trials=args.trials, seed=42, device=args.device, load_options=load_options)
    times = []
    t0 = time.perf_counter()
    ref = None
    for i, p in enumerate(paths):
        scan = ScanSource(i, p.name, path=str(p))
        t = time.perf_counter()
        ds = load_scan(scan, plan)
        load_s = time.perf_counter() - t
        if ref is None:
            result = fit_reference(ds, plan, {}, store.calibration_path(scan))
            ref, cal = result.fit.params, store.calibration_path(scan)
        else:
            result = fit_from(ds, plan, cal, ref, held_values(HELD, ref), "reference")
        rec = store.write_done(scan, "serial", result, "reference" if i == 0 else "scan",
                               {"load_s": load_s}, {})
        times.append(rec["timings"])
        del ds
    return time.perf_counter() - t0, times


def series_pass(paths: list[Path], out: Path, args: argparse.Namespace,
                load_options: dict[str, Any], client: Any) -> tuple[float, list[dict[str, float]]]:
    from livessb.series import fit_series

    t0 = time.perf_counter()
    result = fit_series([str(p) for p in paths], client=client, fixed=HELD, out=out,
                        trials=args.trials, device=args.device, progress=False,
                        load_options=load_options)
    wall = time.perf_counter() - t0
    bad = [r for r in result.records if r["status"] != "done"]
    if bad:
        raise SystemExit(f"series failed: {bad}")
    return wall, [r["timings"] for r in result.records]


def per_scan(times: list[dict[str, float]]) -> dict[str, Any]:
    keys = ("load_s", "open_s", "fit_s", "reconstruct_s", "write_s", "total_s")
    warm = times[1:] or times
    return {"reference": {k: times[0].get(k) for k in keys},
            "warm_median": {k: statistics.median(t[k] for t in warm) for k in keys},
            "all": times}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--workload", default="small", choices=["small", "spec"])
    ap.add_argument("--scans", type=int, default=8)
    ap.add_argument("--scan-px", type=int, default=512,
                    help="spec workload: scan rows = cols (512: SPEC §4, 18 GiB a file)")
    ap.add_argument("--files", type=int, default=0, help="distinct files (0: auto)")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=2, help="passes of each (alternating)")
    ap.add_argument("--data", type=Path, default=Path("/tmp/livessb-series-bench"))
    ap.add_argument("--json", type=Path, required=True)
    args = ap.parse_args()
    from distributed import Client

    from livessb.series.cluster import start_local

    args.data.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    paths, data = make_files(args, args.data / "in")
    data["make_s"] = time.perf_counter() - t
    print(f"files: {data['files']} written in {data['make_s']:.1f} s", flush=True)
    step = data.get("scan_step_A", 0.6)
    load_options = {**CAL, "scan_step_A": step}
    t = time.perf_counter()
    cluster, what = start_local(1, args.device, print)  # what `livessb series --workers 1` starts
    client = Client(cluster)
    print(f"cluster: {what}", flush=True)
    cluster_s = time.perf_counter() - t
    # Both passes warm: compiled kernels in this process and on the worker (a first scan
    # each, untimed), so the comparison is of the series machinery, not of compilation.
    warm_paths = paths[:2]
    evict(sorted(set(paths)))
    serial_pass(warm_paths, args.data / "warm-serial", args, load_options)
    series_pass(warm_paths, args.data / "warm-series", args, load_options, client)
    results: dict[str, Any] = {}
    # Alternating passes, the fastest of each kept: a shared machine's load drifts.
    order = [("serial", "series"), ("series", "serial")] * args.repeats
    for name in [n for pair in order[:args.repeats] for n in pair]:
        shutil.rmtree(args.data / name, ignore_errors=True)
        evict(sorted(set(paths)))
        if name == "serial":
            wall, times = serial_pass(paths, args.data / name, args, load_options)
        else:
            wall, times = series_pass(paths, args.data / name, args, load_options, client)
        print(f"{name}: {wall:.2f} s, {len(paths) / wall:.3f} scans/s", flush=True)
        walls = [*results.get(name, {}).get("passes_wall_s", []), wall]
        if wall <= min(walls):
            results[name] = {"wall_s": wall, "scans_per_s": len(paths) / wall,
                             **per_scan(times)}
        results[name]["passes_wall_s"] = walls
    client.close()
    cluster.close()
    ratio = results["series"]["wall_s"] / results["serial"]["wall_s"]
    record = {
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "commit": git_commit(), "versions": versions(__version__),
        "device": device_name(args.device), "workload": {
            "kind": args.workload, "scans": args.scans, "trials": args.trials,
            "held": list(HELD), "warm_start": "reference", **data},
        "cluster": what, "cluster_start_s": cluster_s, "series_workers": 1, **results,
        "series_over_serial_wall": ratio, "within_10_percent": ratio <= 1.10,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(record, indent=1, default=float))
    print(f"series / serial wall time: {ratio:.3f}; wrote {args.json}")


if __name__ == "__main__":
    main()

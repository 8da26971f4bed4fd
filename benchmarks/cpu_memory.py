"""CPU engine peak memory (RSS) per stage, one subprocess per case.

Each case writes a uint16 ``.npy`` (a BF disk with Poisson noise, written a scan row
at a time), then in a fresh process loads it memory-mapped (``livessb.load``), opens a
CPU ``Session`` (descan measurement, BF gather), prepares the spectra and sets the
rotation, scores one candidate and reconstructs at Auto upsampling. Per stage:
``VmHWM`` (the kernel's high-water mark of the process's whole resident set, file pages
included; not ``ru_maxrss``, which after fork + exec also holds the parent's peak: the
parent that wrote the file) and the peak of the anonymous resident set (``RssAnon``,
sampled every 2 ms: what the process allocated, without the input's file pages). The
file is written by its own process, so this one never maps it. The
target (issue 16 item 3): peak RSS ≤ BF counts + spectra + 1 GiB, the memory-mapped
input not counted. A case the memory preflight refuses is recorded with its message
and estimate.

    python benchmarks/cpu_memory.py [--cases 256x64,512x192] [--json OUT]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

from livessb.bench.report import git_commit  # noqa: E402
from livessb.memory import host_free_bytes  # noqa: E402

GiB = 2**30
NOISE_ROWS = 8  # distinct Poisson scan rows, reused (rolled) down the scan: fast to write

CHILD = r"""
import json, sys, threading, time
import numpy as np
import livessb
from livessb.memory import InsufficientMemoryError, session_estimates, reconstruct_estimate

def status(key):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
def anon():
    return status("RssAnon")
peak = [0]
def sample():
    while True:
        peak[0] = max(peak[0], anon())
        time.sleep(0.002)
threading.Thread(target=sample, daemon=True).start()

out = {"stages": {}}
t0 = time.perf_counter()
def stage(name):
    peak[0] = max(peak[0], anon())
    out["stages"][name] = {
        "peak_rss_bytes": status("VmHWM"),
        "peak_anon_bytes": peak[0], "t_s": time.perf_counter() - t0}
    peak[0] = 0

ds = livessb.load(sys.argv[1], voltage_kV=200, semiangle_mrad=20, scan_step_A=0.4,
                  progress=False)
stage("load")
est = session_estimates(ds, "cpu")[0]
out["estimate"] = {"parts": est.parts, "total_bytes": est.total}
try:
    s = livessb.Session(ds, device="cpu")
except InsufficientMemoryError as exc:
    out["refused"] = str(exc)
    print(json.dumps(out)); raise SystemExit(0)
stage("session (descan, BF gather)")
out["bf_counts_bytes"] = int(s._engine.resident_bf_counts().nbytes)
s.rotation_deg, s.transpose = 12.0, False
s.loss_evaluator()(np.array([[-50.0, 0, 0, 0, 0, 0]]))
stage("spectra + rotation + one loss")
info = s._engine.spectra_info(s._engine.live_spectra()[0])
out["n_bf"], out["spectra_bytes"] = info["n_bf"], info["spectra_bytes"]
out["reconstruct_estimate_bytes"] = reconstruct_estimate(ds, "cpu", s.upsample_factor).total
try:
    s.reconstruct({"C10": -50.0})
    stage("reconstruct (Auto upsampling %d)" % s.upsample_factor)
except InsufficientMemoryError as exc:
    out["reconstruct_refused"] = str(exc)
print(json.dumps(out))
"""


def write_npy(path: Path, scan: int, det: int) -> None:
    rng = np.random.default_rng(0)
    kr, kc = np.meshgrid(np.arange(det), np.arange(det), indexing="ij")
    c = (det - 1) / 2
    disk = ((kr - c) ** 2 + (kc - c) ** 2 <= (det / 4) ** 2)
    lam = np.where(disk, 50.0, 0.2)
    noise = [rng.poisson(lam, size=(scan, det, det)).astype(np.uint16)
             for _ in range(min(NOISE_ROWS, scan))]
    arr = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint16,
                                    shape=(scan, scan, det, det))
    for r in range(scan):
        arr[r] = np.roll(noise[r % len(noise)], r // len(noise), axis=0)
        if r % 16 == 15:
            arr.flush()  # bounded dirty pages
    arr.flush()
    del arr


def run_case(scan: int, det: int, tmp: Path) -> dict[str, Any]:
    path = tmp / f"scan{scan}_det{det}.npy"
    file_bytes = scan * scan * det * det * 2
    free_disk = shutil.disk_usage(tmp).free
    if free_disk < file_bytes + GiB:
        return {"scan": scan, "detector": det, "file_bytes": file_bytes,
                "error": f"{free_disk / GiB:.1f} GiB free on {tmp}: too little for the file"}
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--write", str(path), str(scan), str(det)],
                   check=True, env=env)
    write_s = time.perf_counter() - t0
    res: dict[str, Any] = {"scan": scan, "detector": det, "file_bytes": file_bytes,
                           "write_s": write_s, "free_before": host_free_bytes(),
                           "loadavg_before": list(os.getloadavg())}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True,
                          text=True, env=env)
    path.unlink()
    res["loadavg_after"] = list(os.getloadavg())
    if proc.returncode != 0:
        return {**res, "error": proc.stderr[-2000:], "returncode": proc.returncode}
    res.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    if "spectra_bytes" in res:
        stages = res["stages"].values()
        target = res["bf_counts_bytes"] + res["spectra_bytes"] + GiB
        res.update(peak_rss_bytes=max(v["peak_rss_bytes"] for v in stages),
                   peak_anon_bytes=max(v["peak_anon_bytes"] for v in stages),
                   target_bytes=target)
        res["within_target"] = res["peak_rss_bytes"] <= target
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="256x64,512x192")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--tmp", type=Path, default=None, help="folder for the .npy files")
    ap.add_argument("--write", nargs=3, metavar=("PATH", "SCAN", "DET"),
                    help=argparse.SUPPRESS)  # the writer process of run_case
    args = ap.parse_args(argv)
    if args.write:
        write_npy(Path(args.write[0]), int(args.write[1]), int(args.write[2]))
        return 0
    out = args.json or (REPO / "benchmarks" / "results"
                        / f"cpu-memory-{dt.date.today().isoformat()}.json")
    cases = [tuple(int(v) for v in c.split("x")) for c in args.cases.split(",")]
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        results = [run_case(scan, det, Path(tmp)) for scan, det in cases]
    doc = {"what": "CPU engine peak RSS per stage (VmHWM, and the sampled peak of the "
                   "anonymous RSS), fresh process per case; target: BF counts + spectra + "
                   "1 GiB, memory-mapped input not counted",
           "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
           "commit": git_commit(),
           "host": {"cpus": os.cpu_count(), "loadavg": list(os.getloadavg()),
                    "mem_total_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")},
           "cases": results}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    for r in results:
        print({k: r.get(k) for k in ("scan", "detector", "peak_rss_bytes", "peak_anon_bytes",
                                     "target_bytes", "within_target", "refused", "error")})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

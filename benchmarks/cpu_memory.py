"""CPU engine peak memory (RSS) per stage, one subprocess per case.

Each case writes a uint16 ``.npy`` (a BF disk with Poisson noise, written a scan row
at a time), then in a fresh process loads it memory-mapped (``livessb.load``), opens a
CPU ``Session`` (BF gather), prepares the spectra and sets the rotation (trotter
geometry), scores one
candidate and reconstructs at Auto upsampling; ``ru_maxrss`` after each stage is the
high-water mark so far. The target (issue 16 item 3): peak RSS ≤ BF counts + spectra
+ 1 GiB (the memory-mapped input not counted). A case the memory preflight refuses is
recorded with its estimate.

    python benchmarks/cpu_memory.py [--cases 256x64,512x192] [--json OUT]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
GiB = 2**30

CHILD = r"""
import json, math, resource, sys, time
import numpy as np
import livessb
from livessb.memory import InsufficientMemoryError

def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

out = {"stages": {}}
t0 = time.perf_counter()
def stage(name):
    out["stages"][name] = {"peak_rss_bytes": rss(), "t_s": time.perf_counter() - t0}

ds = livessb.load(sys.argv[1], voltage_kV=200, semiangle_mrad=20, scan_step_A=0.4)
stage("load")
try:
    s = livessb.Session(ds, device="cpu")
except InsufficientMemoryError as exc:
    out["refused"] = str(exc)
    print(json.dumps(out)); raise SystemExit(0)
stage("session (BF gather)")
out["bf_counts_bytes"] = int(s._engine.resident_bf_counts().nbytes)
s.rotation_deg, s.transpose = 12.0, False
s.loss_evaluator()(np.array([[-50.0, 0, 0, 0, 0, 0]]))
stage("spectra + rotation + one loss")
info = s._engine.spectra_info(s._engine.live_spectra()[0])
out["n_bf"], out["spectra_bytes"] = info["n_bf"], info["spectra_bytes"]
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
    arr = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint16,
                                    shape=(scan, scan, det, det))
    for r in range(scan):
        arr[r] = rng.poisson(np.where(disk, 50.0, 0.2), size=(scan, det, det))
    arr.flush()
    del arr


def run_case(scan: int, det: int, tmp: Path) -> dict[str, Any]:
    path = tmp / f"scan{scan}_det{det}.npy"
    write_npy(path, scan, det)
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True,
                          text=True, env=env)
    path.unlink()
    if proc.returncode != 0:
        return {"scan": scan, "detector": det, "error": proc.stderr[-2000:]}
    res: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    res.update(scan=scan, detector=det, file_bytes=scan * scan * det * det * 2)
    if "spectra_bytes" in res:
        peak = max(v["peak_rss_bytes"] for v in res["stages"].values())
        target = res["bf_counts_bytes"] + res["spectra_bytes"] + GiB
        res.update(peak_rss_bytes=peak, target_bytes=target, within_target=peak <= target)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="256x64,512x192")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    out = args.json or (REPO / "benchmarks" / "results"
                        / f"cpu-memory-{dt.date.today().isoformat()}.json")
    cases = [tuple(int(v) for v in c.split("x")) for c in args.cases.split(",")]
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        results = [run_case(scan, det, Path(tmp)) for scan, det in cases]
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip()
    doc = {"what": "CPU engine peak RSS per stage (ru_maxrss, fresh process per case); "
                   "target: BF counts + spectra + 1 GiB, memory-mapped input not counted",
           "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "commit": commit,
           "host": {"cpus": os.cpu_count(), "loadavg": list(load),
                    "mem_total_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")},
           "cases": results}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    for r in results:
        print({k: r.get(k) for k in ("scan", "detector", "peak_rss_bytes", "target_bytes",
                                     "within_target", "refused")})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

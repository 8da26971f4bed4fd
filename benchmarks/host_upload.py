"""Opening a session on host counts (a file read into memory, a memmap): the BF counts onto
the GPU. The engine's path (slabs of whole patterns copied up and gathered by the device,
``engine/cuda/memory.upload_bf_counts``) against a host-side gather (fancy indexing of
every pattern per scan row, then the BF values copied up: the path before 2026-12-02),
on the same machine and data; both results compared bit for bit.

    python3 benchmarks/host_upload.py OUT.json [SCAN_PX ...]   (default 256 512)
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))


def host_side_gather(cp: Any, counts: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> Any:
    """The earlier path: each scan row's BF values gathered on the host, then copied."""
    Rr, Rc = counts.shape[:2]
    out = cp.empty((rows.size, Rr, Rc), dtype=counts.dtype)
    for r in range(Rr):
        out[:, r, :] = cp.asarray(np.ascontiguousarray(counts[r][:, rows, cols].T))
    return out


def timed(cp: Any, fn: Any, runs: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(runs):
        out = None
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        out = fn()
        cp.cuda.Device().synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def measure(cp: Any, px: int) -> dict[str, Any]:
    from livessb import Dataset4D
    from livessb.bench.device_data import generate_dataset
    from livessb.engine.cuda import CUDAEngine

    dev, _ = generate_dataset(scan=(px, px), detector=(192, 192), dtype="uint16", seed=3)
    host = cp.asnumpy(dev.counts.device_array)
    del dev
    cp.get_default_memory_pool().free_all_blocks()
    ds = Dataset4D(host, voltage_kV=200, semiangle_mrad=20, scan_step_A=0.7)
    engine = CUDAEngine(ds)
    bf = engine.geo.bf
    engine_s, a = timed(cp, lambda: engine.upload_bf_counts(host), 3)
    before_s, b = timed(cp, lambda: host_side_gather(cp, host, bf.rows, bf.cols), 3)
    same = bool(cp.array_equal(a, b))
    del a, b
    engine.close()
    print(f"{px}²: engine {engine_s:.3f} s, host gather {before_s:.3f} s "
          f"({before_s / engine_s:.1f}x), identical {same}", flush=True)
    return {"scan": [px, px], "detector": [192, 192], "dtype": "uint16",
            "counts_bytes": int(host.nbytes), "bf_bytes": int(bf.count * px * px * 2),
            "engine_s": engine_s, "host_gather_s": before_s, "speedup": before_s / engine_s,
            "identical": same, "engine_GBps_of_counts": host.nbytes / engine_s / 1e9}


def main() -> None:
    import cupy as cp

    from livessb.bench.report import git_commit

    out_path = Path(sys.argv[1])
    sizes = [int(a) for a in sys.argv[2:]] or [256, 512]
    cases = [measure(cp, px) for px in sizes]
    record = {"date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
              "commit": os.environ.get("LIVESSB_COMMIT") or git_commit(),
              "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
              "host_cpus": os.cpu_count(), "cases": cases}
    out_path.write_text(json.dumps(record, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()

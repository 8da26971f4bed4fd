"""Auto reconstruction timed many times in one session, alone and between region edits
(the benchmark's order), each call split into kernel, inverse FFT and the wait for its
download (engine counters), so a change in the wall time can be traced to the device
or to the host's copy. Run under two package versions (PYTHONPATH) on one lease to
compare them.

Usage (device): python3 benchmarks/auto_repeat.py OUT.json [repeats]
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np

from livessb import Session
from livessb.bench.backend import backend_for
from livessb.bench.workload import REGIONS


def _timed(s: Session, repeats: int, between: Any) -> dict[str, list[float]]:
    diag = s.diagnostics
    out: dict[str, list[float]] = {"wall_ms": [], "kernel_ms": [], "ifft_ms": [],
                                   "download_ms": []}
    keep = None
    for _ in range(repeats):
        between()
        before = dict(diag.stats)
        t0 = time.perf_counter()
        rec = s.reconstruct()
        out["wall_ms"].append((time.perf_counter() - t0) * 1e3)
        after = diag.stats
        for key, name in (("kernel_ms", "reconstruct_kernel_s"), ("ifft_ms", "reconstruct_ifft_s"),
                          ("download_ms", "reconstruct_download_s")):
            out[key].append((after.get(name, 0.0) - before.get(name, 0.0)) * 1e3)
        keep = rec  # the result held until the next one, as a notebook would
    del keep
    return out


def main() -> None:
    path = sys.argv[1]
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    ds, _ = backend_for("cuda").generate((512, 512), (192, 192), "uint16", 42)
    result: dict[str, Any] = {}
    with Session(ds, device="cuda") as s:
        s.fit(trials=200, seed=42, progress=False)
        s.reconstruct()
        result["alone"] = _timed(s, repeats, lambda: None)

        def regions() -> None:
            for bounds in REGIONS.values():
                s.fit_region(bounds, trials=200, seed=42)

        result["after_regions"] = _timed(s, max(4, repeats // 4), regions)
    summary = {k: {m: round(float(np.median(v[m])), 3) for m in v} for k, v in result.items()}
    print(json.dumps(summary))
    with open(path, "w") as f:
        json.dump({"summary": summary, "runs": result}, f, indent=1)


if __name__ == "__main__":
    main()

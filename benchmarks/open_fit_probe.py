"""Open and full-field fit of fresh sessions, timed with and without a device sync
between them (SPEC §4 workload, one H200): where a fit's time goes when the session
was just opened (the benchmark's open is not synchronised). Writes OUT (JSON).

    PYTHONPATH=python python benchmarks/open_fit_probe.py OUT [RUNS]
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import cupy as cp

from livessb.bench.backend import backend_for
from livessb.session import Session


def main(out: str, runs: int = 3) -> None:
    be = backend_for("cuda")
    ds, _ = be.generate((512, 512), (192, 192), "uint16", 42)
    s = Session(ds, device="cuda")  # warm: kernels compiled, plans made
    s.fit(trials=200, seed=42, progress=False)
    s.close()
    result: dict[str, list[list[dict[str, Any]]]] = {}
    for variant in ("no_sync", "sync", "no_sync", "sync"):
        rows = []
        for _ in range(runs):
            be.free_pool()
            t0 = time.perf_counter()
            s = Session(ds, device="cuda")
            t1 = time.perf_counter()
            if variant == "sync":
                cp.cuda.Device().synchronize()
            t2 = time.perf_counter()
            fit = s.fit(trials=200, seed=42, progress=False)
            t3 = time.perf_counter()
            s.close()
            rows.append({"open_s": t1 - t0, "sync_s": t2 - t1, "fit_s": t3 - t2,
                         "rotation_s": fit.timings["rotation_s"],
                         "branch_choice_s": fit.timings["branch_choice_s"]})
        result.setdefault(variant, []).append(rows)
        print(variant, json.dumps(rows), flush=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3)

"""Where a region fit's errors stage spends its time, run by run (issue 19: errors ≤ 5 % of
each fit). On the SPEC §4 workload the 256² region's ``errors_s`` scatters 6–17 ms from run
to run; this times each step of ``fit.uncertainty.assess`` (the device synchronised before
and after each, so a step's time is its own and not the queue's) and logs every cyclic
garbage collection (generation, duration) that falls inside the stage.

Usage (device tool): python3 benchmarks/errors_stage_probe.py OUT.json [REGION] [RUNS]
REGION: a key of livessb.bench.workload.REGIONS (region_256).
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np

from livessb import Session
from livessb.bench.backend import backend_for
from livessb.bench.workload import REGIONS
from livessb.fit import uncertainty

STEPS = ("window_pixel_totals", "window_statistics", "frequency_terms", "standard_errors",
         "cluster_gradients", "misfit_errors", "band_sums", "band_kappa_ratio",
         "compare_bands", "combined_errors", "undetermined", "depth_not_determined",
         "depth_not_described")


def main() -> None:
    import cupy as cp

    path = sys.argv[1]
    region = REGIONS[sys.argv[2] if len(sys.argv) > 2 else "region_256"]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    log: list[tuple[str, float]] = []  # (event, seconds) of the current run

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            cp.cuda.Device().synchronize()
            log.append((name, time.perf_counter() - t0))
            return out
        return wrapper

    for name in STEPS:
        setattr(uncertainty, name, timed(name, getattr(uncertainty, name)))
    gc_start: dict[str, float] = {}

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_start["t"] = time.perf_counter()
        else:
            log.append((f"gc{info['generation']}", time.perf_counter() - gc_start["t"]))

    ds, _ = backend_for("cuda").generate((512, 512), (192, 192), "uint16", 42)
    rows: list[dict[str, Any]] = []
    with Session(ds, device="cuda") as s:
        s.fit(trials=200, seed=42, progress=False)
        gc.callbacks.append(on_gc)
        for i in range(runs + 1):
            log.clear()
            fit = s.fit_region(region, trials=200, seed=42).fit
            steps: dict[str, float] = {}
            for name, dt in log:
                steps[name] = steps.get(name, 0.0) + dt
            rows.append({"run": i, "errors_s": fit.timings.get("errors_s"),
                         "total_s": fit.timings.get("total_s"),
                         "steps_ms": {k: round(v * 1e3, 3) for k, v in steps.items()}})
            print(i, round(fit.timings.get("errors_s", 0.0) * 1e3, 2), rows[-1]["steps_ms"],
                  flush=True)
        gc.callbacks.remove(on_gc)
    warm = [float(r["errors_s"]) for r in rows[1:]]
    out = {"what": __doc__.split("\n\n")[0], "date": datetime.now(UTC).isoformat(),
           "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
           "region": region, "runs": rows,
           "errors_ms_warm": [round(v * 1e3, 2) for v in warm],
           "errors_ms_median": float(np.median(warm)) * 1e3}
    with open(path, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

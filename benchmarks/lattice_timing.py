"""Crystal mode's cost (fit.lattice) on a device: the embedded demo (96² scan, 0.6 Å
steps, a crystal), full-field fit, then regions of 16² and 32² fitted per-bin and with
``object_model="lattice"``; each region's total time, the lattice stage's seconds and
its C10 against the simulator's truth, median of RUNS after a warm-up. "lattice_integrating"
is crystal mode with the pixels read as integrating (3 × 3 samples a pixel at the demo's
11.5 px radius): its cost only, the demo's pixels being points.

Usage: python3 benchmarks/lattice_timing.py OUT.json [DEVICE] [RUNS]
"""

from __future__ import annotations

import datetime
import json
import statistics
import sys
import time

from livessb import Session
from livessb.bench.report import device_name, git_commit
from livessb.simulate.demo import demo_dataset

MODELS = ("per_bin", "lattice", "lattice_integrating")


def main() -> None:
    out = sys.argv[1]
    device = sys.argv[2] if len(sys.argv) > 2 else "cuda"
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    ds, truth = demo_dataset(with_truth=True)
    record: dict[str, object] = {
        "device": device, "gpu": device_name(device), "commit": git_commit(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "runs": runs, "regions": []}
    with Session(ds, device=device) as s:
        t0 = time.perf_counter()
        s.fit(trials=200, seed=1, progress=False)
        record["full_fit_s"] = time.perf_counter() - t0
        for bounds in [(40, 56, 40, 56), (32, 64, 32, 64)]:
            true_c10 = truth.local_params(bounds)["C10"]
            row: dict[str, object] = {"bounds": list(bounds), "truth_C10": true_c10}
            for model in MODELS:
                times, stage = [], []
                ds.detector_pixels = "integrating" if model.endswith("integrating") else "points"
                for _ in range(runs + 1):  # the first warms up (compiles, plans)
                    t = time.perf_counter()
                    fit = s.fit_region(bounds, trials=200, seed=1,
                                       object_model=model.split("_integrating")[0]).fit
                    times.append(time.perf_counter() - t)
                    stage.append(float(fit.timings.get("lattice_s", 0.0)))
                row[model] = {"region_s": statistics.median(times[1:]),
                              "lattice_s": statistics.median(stage[1:]),
                              "C10_deviation_A": fit.params["C10"] - true_c10,
                              "C10_error_A": fit.errors["C10"],
                              "record": {k: v for k, v in fit.lattice.items()
                                         if k not in ("per_bin", "lobes", "pixel_sets",
                                                      "rings", "bands")}}
            record["regions"].append(row)  # type: ignore[attr-defined]
            print(bounds, {m: (round(row[m]["region_s"], 3),  # type: ignore[index]
                               round(row[m]["C10_deviation_A"], 2))  # type: ignore[index]
                           for m in MODELS}, flush=True)
    with open(out, "w") as f:
        json.dump(record, f, indent=1, default=float)


if __name__ == "__main__":
    main()

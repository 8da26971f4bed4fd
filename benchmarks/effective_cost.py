"""What the effective scan frequencies cost on a GPU (issue 20 item 2): warm medians of
``prepare`` (full field, 128² and 256² regions) with scan_frequencies "grid" and
"effective" on the SPEC §4 workload, and each mode's full fit and 128² region; writes
OUT/effective_cost.txt (OUT: $OUT or the current folder) with a cProfile of each mode's
last fit.

    python3 benchmarks/effective_cost.py
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

REGIONS = (("full", None), ("r128", (224, 352, 224, 352)), ("r256", (128, 384, 128, 384)))


def main() -> None:
    import cupy as cp

    from livessb.bench.backend import backend_for
    from livessb.session import Session

    sync = cp.cuda.Device().synchronize
    ds, _ = backend_for("cuda").generate((512, 512), (192, 192), "uint16", 42)
    lines = []
    for mode in ("grid", "effective"):
        s = Session(ds, device="cuda", scan_frequencies=mode)
        eng = s._check_open()
        for name, bounds in REGIONS:
            times = []
            for _ in range(6):
                sync()
                t0 = time.perf_counter()
                sp = eng.prepare(bounds)
                sync()
                times.append(time.perf_counter() - t0)
                eng.release(sp)
            lines.append(f"{mode} prepare {name}: median {statistics.median(times[1:]) * 1e3:.2f}"
                         f" ms (all {[round(t * 1e3, 2) for t in times]})")
            print(lines[-1], flush=True)
        s.fit(trials=200, seed=42, progress=False)
        pr = cProfile.Profile()
        for _ in range(2):
            sync()
            t0 = time.perf_counter()
            pr = cProfile.Profile()
            pr.enable()
            s.fit(trials=200, seed=42, progress=False)
            sync()
            pr.disable()
            fit_s = time.perf_counter() - t0
            t1 = time.perf_counter()
            s.fit_region((224, 352, 224, 352), trials=200, seed=42)
            sync()
            lines.append(f"{mode} fit {fit_s:.4f} s, region128 {time.perf_counter() - t1:.4f} s")
            print(lines[-1], flush=True)
        out = io.StringIO()
        pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(25)
        lines.append(out.getvalue())
        s.close()
    folder = Path(os.environ.get("OUT", "."))
    (folder / "effective_cost.txt").write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    main()

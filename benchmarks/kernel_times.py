"""Device time by kernel of one warm operation, for Nsight Compute (device run).

The operation runs once to warm up, then once between cudaProfilerStart/Stop, so
``ncu --profile-from-start off`` times only its launches. Then ``--summary`` (no GPU
needed) adds the durations of an ncu CSV up per kernel.

    ncu --profile-from-start off --metrics gpu__time_duration.sum --csv \\
        python3 benchmarks/kernel_times.py map > OUT.csv
    python3 benchmarks/kernel_times.py --summary OUT.csv [TOP]
Operations: fit, region (128², SPEC §4), map (8×8 of 64²), reconstruct (Auto).
"""

from __future__ import annotations

import collections
import csv
import io
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

REGION = (192, 320, 192, 320)


def summary(path: str, top: int = 30) -> None:
    """Per kernel (template arguments kept): launches, total and mean µs, share."""
    text = Path(path).read_text(errors="replace")
    start = text.find('"ID"')
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    total: collections.Counter[str] = collections.Counter()
    count: collections.Counter[str] = collections.Counter()
    for row in rows:
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "nsecond")
        us = value / 1e3 if unit.startswith("n") else value * 1e3 if unit.startswith("m") \
            else value
        name = re.sub(r"\(.*", "", row["Kernel Name"]).strip()
        total[name] += us
        count[name] += 1
    whole = sum(total.values())
    print(f"{sum(count.values())} launches, {whole / 1e3:.2f} ms of device time")
    for name, us in total.most_common(top):
        print(f"{us / 1e3:9.3f} ms {100 * us / whole:5.1f} % {count[name]:6d} x "
              f"{us / count[name]:8.1f} us  {name[:90]}")


def main(operation: str) -> None:
    import cupy as cp

    from livessb.bench.backend import backend_for
    from livessb.session import Session

    ds, _ = backend_for("cuda").generate((512, 512), (192, 192), "uint16", 42)
    with Session(ds, device="cuda") as s:
        ops: dict[str, Any] = {
            "fit": lambda: s.fit(trials=200, seed=42, progress=False),
            "region": lambda: s.fit_region(REGION, trials=200, seed=42),
            "map": lambda: s.fit_map(tile=(64, 64), trials=200, seed=42, progress=False),
            "reconstruct": lambda: s.reconstruct(),
        }
        s.fit(trials=200, seed=42, progress=False)
        ops[operation]()  # warm
        cp.cuda.Device().synchronize()
        cp.cuda.runtime.profilerStart()
        ops[operation]()
        cp.cuda.Device().synchronize()
        cp.cuda.runtime.profilerStop()


if __name__ == "__main__":
    if sys.argv[1] == "--summary":
        summary(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 30)
    else:
        main(sys.argv[1])

"""Where a 128² region's search and Newton time goes, by launch shape (device run).

Usage: python3 benchmarks/region_probe.py OUT.json
Times evaluate (batches of 100 and 25) and derivatives (3 and 1 starts) on the region
(192, 320, 192, 320) of the benchmark dataset for several pixel splits of the b loop
and both candidate groupings, and records whether the losses depend on the split (they
must not beyond float64 reassociation of the split sums).
"""

from __future__ import annotations

import functools
import json
import math
import sys
from typing import Any

import numpy as np

from livessb.bench.timing import full_field_session, median_time
from livessb.bench.workload import random_candidates
from livessb.engine import cuda_kernels as ck
from livessb.engine.cuda import engine as cuda_engine
from livessb.fit.model import ThickSampleModel

REGION = (192, 320, 192, 320)


def fixed_split(want: int, M: int, n_bf: int, min_blocks: int = 0) -> tuple[int, int]:
    per = math.ceil(math.ceil(n_bf / want) / ck.BT) * ck.BT
    return per, math.ceil(n_bf / per)


def main() -> None:
    s, _ = full_field_session(512)
    eng = s.diagnostics.engine
    model = ThickSampleModel(eng, REGION, math.radians(s.rotation_deg), bool(s.transpose))
    sp = model.spectra
    rng = np.random.default_rng(0)
    c100, c25 = random_candidates(rng, 100), random_candidates(rng, 25)
    d3 = np.array([[-80, 20, 0.5, 0, 0, 10]] * 3, dtype=float) + rng.normal(0, 1, (3, 6))
    M = eng.spectra_info(sp)["half_plane"]
    default = cuda_engine.pixel_split  # the engine's split of the b loop, patched per row
    out: dict[str, Any] = {"M": M, "B": sp.n_bf, "default_split": default(M, sp.n_bf)}
    rows = {}
    for want in (0, 4, 8, 16, 32, 64):
        cuda_engine.pixel_split = default if want == 0 else functools.partial(fixed_split, want)
        row: dict[str, Any] = {"split": cuda_engine.pixel_split(M, sp.n_bf)}
        for kc in (2, 4):
            eng.eval_group = kc
            row[f"eval100_g{kc}_ms"] = median_time(lambda: eng.evaluate(sp, c100), 5) * 1e3
            row[f"eval25_g{kc}_ms"] = median_time(lambda: eng.evaluate(sp, c25), 5) * 1e3
        eng.eval_group = 4
        row["loss100_sum"] = float(np.sum(eng.evaluate(sp, c100)))
        row["deriv3_ms"] = median_time(lambda: eng.derivatives(sp, d3), 5) * 1e3
        row["deriv1_ms"] = median_time(lambda: eng.derivatives(sp, d3[:1]), 5) * 1e3
        rows[str(want or "default")] = row
        print(want or "default", json.dumps(row), flush=True)
    out["rows"] = rows
    cuda_engine.pixel_split = default
    model.release()
    s.close()
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

"""A map's reconstruction, one launch per tile against tiles batched per launch (issue 19
item 3): on the SPEC §4 workload (512² × 192², Auto 3× → 1536²), 64 tile parameter sets
around the fitted ones, warm medians of reconstructing them one ``reconstruct`` per tile
(resident) and by ``reconstruct_many`` with at most 2 and 4 tiles per launch, whether
each batch gives the per-tile bits, and the session's whole ``reconstruct_map`` of an 8×8
map. Writes OUT/map_reconstruct_batch.json (OUT: $OUT or the current folder).

    python3 benchmarks/map_reconstruct_batch.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))


def main() -> None:
    import cupy as cp
    import numpy as np

    from livessb.bench.backend import backend_for
    from livessb.engine import cuda_kernels as ck
    from livessb.session import Session

    sync = cp.cuda.Device().synchronize
    ds, _ = backend_for("cuda").generate((512, 512), (192, 192), "uint16", 42)
    out: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"),
                           "commit": os.environ.get("LIVESSB_COMMIT", "unknown"),
                           "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()}
    with Session(ds, device="cuda") as s:
        fit = s.fit(trials=200, seed=42, progress=False)
        f = s.upsample_factor
        model = s._full_model(s._theta, bool(s.transpose))
        rng = np.random.default_rng(1)
        tiles = [{**fit.params, "C10": fit.params["C10"] + float(d)}
                 for d in rng.uniform(-15, 15, 64)]

        def timed(run: Any) -> tuple[float, list[Any]]:
            times, images = [], []
            for _ in range(4):
                sync()
                t0 = time.perf_counter()
                images = run()
                sync()
                times.append(time.perf_counter() - t0)
            return statistics.median(times[1:]), images

        per_tile_s, each = timed(lambda: [model.reconstruct(p, f, "ssb", resident=True)
                                          for p in tiles])
        out["per_tile_launch_s"] = per_tile_s
        for groups in ((1, 2), (1, 2, 4)):
            ck.RECON_GROUPS = groups
            batch_s, batch = timed(lambda: model.reconstruct_many(tiles, f, "ssb"))
            same = all(bool(cp.array_equal(a, b)) for a, b in zip(batch, each, strict=True))
            worst = max(float(cp.abs(a - b).max()) for a, b in zip(batch, each, strict=True))
            out[f"batched_{max(groups)}_s"] = batch_s
            out[f"batched_{max(groups)}_bitwise"] = same
            out[f"batched_{max(groups)}_max_abs"] = worst
            print(f"{len(tiles)} tiles at {f}x: per tile {per_tile_s * 1e3:.1f} ms, "
                  f"<= {max(groups)} per launch {batch_s * 1e3:.1f} ms, same bits {same} "
                  f"(max |diff| {worst:.2e})", flush=True)
        m = s.fit_map(tile=(64, 64), trials=200, seed=42, progress=False)
        times = []
        for _ in range(4):
            t0 = time.perf_counter()
            m.reconstruct()
            times.append(time.perf_counter() - t0)
        out["reconstruct_map_8x8_s"] = statistics.median(times[1:])
        out["reconstruct_map_8x8_all_s"] = times
        print(f"reconstruct_map 8x8: {out['reconstruct_map_8x8_s'] * 1e3:.1f} ms", flush=True)
    dest = Path(os.environ.get("OUT", ".")) / "map_reconstruct_batch.json"
    dest.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

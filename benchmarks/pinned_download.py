"""A/B in one process: the Auto reconstruction (and a 128² region) with the image
downloaded into pinned host memory (the engine's path) against a plain ``.get()`` into
pageable memory (monkeypatched), SPEC §4 workload, warm medians; prints and writes
OUT/pinned_download.json (OUT: $OUT or the current folder)."""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))


def main() -> None:
    import cupy as cp

    import livessb.xp as xp
    from livessb.bench.backend import backend_for
    from livessb.session import Session

    sync = cp.cuda.Device().synchronize
    ds, _ = backend_for("cuda").generate((512, 512), (192, 192), "uint16", 42)
    s = Session(ds, device="cuda")
    s.fit(trials=200, seed=42, progress=False)
    pinned = xp._download_pinned
    out: dict[str, object] = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()}
    hashes = {}
    for mode in ("pageable", "pinned", "pageable", "pinned"):
        xp._download_pinned = (lambda x: None) if mode == "pageable" else pinned  # type: ignore[assignment]
        auto, region = [], []
        for _ in range(12):
            sync()
            t0 = time.perf_counter()
            rec = s.reconstruct()
            auto.append(time.perf_counter() - t0)
        for _ in range(4):
            t0 = time.perf_counter()
            s.fit_region((224, 352, 224, 352), trials=200, seed=42)
            region.append(time.perf_counter() - t0)
        hashes[mode] = rec.phase_hash()
        out.setdefault(mode, []).append(  # type: ignore[union-attr]
            {"auto_ms": statistics.median(auto[2:]) * 1e3,
             "region128_ms": statistics.median(region[1:]) * 1e3})
        print(mode, out[mode][-1], flush=True)  # type: ignore[index]
    out["identical_images"] = hashes["pinned"] == hashes["pageable"]
    print("identical", out["identical_images"])
    s.close()
    folder = Path(os.environ.get("OUT", "."))
    (folder / "pinned_download.json").write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()

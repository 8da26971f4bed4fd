"""What a model setting (``alias_pixels="excluded"``, ``scan_window="hann"`` or "auto")
costs and changes on the SPEC §4 workload (0.7 Å steps at 200 kV, 20 mrad: one alias order
per axis): warm full-field fit, 128² region, Auto reconstruction and an 8×8 map with the
default and with the setting, the window check's share, the fitted C10 and C12 (and their
errors) against the synthetic truth and the pairs each keeps. One process, both settings
in turn.

Usage: python3 benchmarks/setting_cost.py OUT.json NAME=VALUE[,NAME=VALUE] [cuda|cpu] [scan]
[detector] [runs] (several settings at once: ``alias_pixels=excluded,scan_window=hann``)
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import UTC, datetime
from typing import Any

import numpy as np

from livessb import Session
from livessb.bench.backend import backend_for
from livessb.bench.workload import REGIONS

DEFAULTS = {"alias_pixels": "kept", "scan_window": "none"}  # Session's


def _warm(fn: Any, runs: int) -> tuple[float, Any]:
    out = fn()  # the first call compiles / builds caches
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def main() -> None:
    path = sys.argv[1]
    settings = dict(item.split("=", 1) for item in sys.argv[2].split(","))
    unknown = sorted(set(settings) - set(DEFAULTS))
    if unknown:
        sys.exit(f"setting_cost: NAME must be one of {sorted(DEFAULTS)}, got {unknown}")
    label = ",".join(f"{k}={v}" for k, v in settings.items())
    device = sys.argv[3] if len(sys.argv) > 3 else "cuda"
    scan = int(sys.argv[4]) if len(sys.argv) > 4 else 512
    det = int(sys.argv[5]) if len(sys.argv) > 5 else 192
    runs = int(sys.argv[6]) if len(sys.argv) > 6 else 3
    backend = backend_for(device)
    ds, truth = backend.generate((scan, scan), (det, det), "uint16", 42)
    region = REGIONS["region_128"] if scan == 512 else (scan // 4, scan // 2, scan // 4, scan // 2)
    rows: dict[str, Any] = {}
    for mode, options in (("default", {k: DEFAULTS[k] for k in settings}), (label, settings)):
        with Session(ds, device=device, alias_pixels=options.get("alias_pixels"),
                     scan_window=options.get("scan_window")) as s:
            t_fit, fit = _warm(lambda s=s: s.fit(trials=200, seed=42, progress=False), runs)
            t_region, reg = _warm(lambda s=s: s.fit_region(region, trials=200, seed=42), runs)
            t_auto, _ = _warm(lambda s=s: s.reconstruct(), runs)
            tile = (scan // 8, scan // 8)  # the benchmark's 8×8 map
            t_map, m = _warm(lambda s=s, t=tile: s.fit_map(tile=t, trials=200, seed=42,
                                                           progress=False), runs)
            pairs = s.diagnostics.full_field_sizes()["trotter_pairs"]
            rows[mode] = {
                "fit_s": t_fit, "region_128_s": t_region, "reconstruct_auto_s": t_auto,
                "trotter_pairs": pairs,
                "window_check_s": fit.timings.get("window_check_s"),  # "hann", "auto"
                "map_8x8_s": t_map, "map_window_check": m.provenance.get("window_check"),
                "fit": {k: fit.params[k] for k in ("C10", "C12", "phi12")},
                "fit_errors": {k: fit.errors.get(k) for k in ("C10", "C12", "phi12")},
                "region": {k: reg.params[k] for k in ("C10", "C12", "phi12")},
                "dC10_fit": fit.params["C10"] - truth.params["C10"],
                "dC10_region": reg.params["C10"] - truth.local_C10(region),
            }
            print(mode, json.dumps({k: v for k, v in rows[mode].items()
                                    if k.endswith("_s") or k.startswith("dC10")}))
    commit = os.environ.get("LIVESSB_COMMIT", "unknown")
    out = {"what": __doc__.split("\n\n")[0], "date": datetime.now(UTC).isoformat(),
           "commit": commit, "device": backend.device_name, "setting": label, "scan": scan,
           "detector": det, "runs": runs, "truth": truth.params, "modes": rows}
    with open(path, "w") as f:
        json.dump(out, f, indent=1, default=float)


if __name__ == "__main__":
    main()

"""Crystal mode's cost on two 16² regions of the demo, for A/B runs between package trees:
one whose second-order terms the data do not see (40:56, 40:56) and one where they are fitted
(0:16, 80:96; three L-BFGS runs), each fitted twice after a warm-up region; prints one JSON
line (seconds and C10 per region). Interleave versions in one shell, e.g.

    for r in 1 2; do for src in OLD/python python; do
        python benchmarks/crystal_region_ab.py $src cpu >> ab.jsonl; done; done

(OLD from `git archive COMMIT python | tar -x -C OLD`).
Usage: python benchmarks/crystal_region_ab.py PACKAGE_DIR [DEVICE]
"""

from __future__ import annotations

import json
import sys
import time

REGIONS = {"not_seen": (40, 56, 40, 56), "fitted": (0, 16, 80, 96)}


def main() -> None:
    sys.path.insert(0, sys.argv[1])
    from livessb import Session
    from livessb.simulate.demo import demo_dataset

    device = sys.argv[2] if len(sys.argv) > 2 else "cpu"
    out: dict[str, object] = {"code": sys.argv[1], "device": device}
    with Session(demo_dataset(), device=device) as s:
        s.fit(trials=200, seed=1, progress=False)
        # the warm-up: compiled kernels, FFT plans and the scan's first lattice
        s.fit_region((20, 36, 20, 36), trials=200, seed=1, object_model="lattice")
        for name, bounds in REGIONS.items():
            seconds = []
            for _ in range(2):
                t = time.perf_counter()
                fit = s.fit_region(bounds, trials=200, seed=1, object_model="lattice").fit
                seconds.append(time.perf_counter() - t)
            out[name] = {"s": seconds, "C10": fit.params["C10"], "error": fit.errors["C10"]}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()

"""Crystal mode's host stages with BLAS on one thread (engine.blas_threads) or as the
process has it, in one process, alternating: crystal-mode 16² regions of the demo (one
whose second-order terms the data do not see, one where they are fitted: three L-BFGS
runs), and as a control the per-bin full fit and 32² region, which do not enter the
extent (their two columns run the same code: the machine's noise). Each figure is the
median of ROUNDS; the fits' C10 of both settings beside them (one BLAS thread changes
L-BFGS's rounding, not its minimum).

Usage: python benchmarks/blas_threads_ab.py OUT.json [DEVICE] [ROUNDS]
"""

from __future__ import annotations

import datetime
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import livessb.engine.blas_threads as blas_threads
from livessb import Session
from livessb.bench.report import device_name, git_commit
from livessb.simulate.demo import demo_dataset

REGIONS = {"crystal_16_terms_not_seen": (40, 56, 40, 56),
           "crystal_16_terms_fitted": (0, 16, 80, 96)}


def _set_one_thread(on: bool, real: tuple[Callable[..., None], Callable[..., None]]) -> None:
    """The extent as shipped (on), or a no-op one (off: BLAS as the process has it)."""
    def idle(self: Any) -> None:
        return None

    one = blas_threads._OneThread
    one.enter, one.leave = real if on else (idle, idle)  # type: ignore[method-assign]


def main() -> None:
    out = sys.argv[1]
    device = sys.argv[2] if len(sys.argv) > 2 else "cpu"
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    real = (blas_threads._OneThread.enter, blas_threads._OneThread.leave)
    times: dict[str, dict[str, list[float]]] = {}
    c10: dict[str, dict[str, float]] = {}

    def timed(name: str, setting: str, run: Callable[[], Any]) -> None:
        t = time.perf_counter()
        fit = run()
        times.setdefault(name, {}).setdefault(setting, []).append(time.perf_counter() - t)
        c10.setdefault(name, {})[setting] = float(fit.params["C10"])

    ds = demo_dataset()
    with Session(ds, device=device) as s:
        s.fit(trials=200, seed=1, progress=False)  # compiles, plans
        s.fit_region(REGIONS["crystal_16_terms_not_seen"], object_model="lattice")
        for _ in range(rounds):
            for on in (True, False):
                _set_one_thread(on, real)
                setting = "one_thread" if on else "process"
                timed("per_bin_full_fit", setting,
                      lambda: s.fit(trials=200, seed=1, progress=False))
                timed("per_bin_region_32", setting,
                      lambda: s.fit_region((32, 64, 32, 64), trials=200, seed=1).fit)
                for name, bounds in REGIONS.items():
                    timed(name, setting, lambda b=bounds: s.fit_region(  # type: ignore[misc]
                        b, trials=200, seed=1, object_model="lattice").fit)
                print(setting, {n: round(t[setting][-1], 3) for n, t in times.items()},
                      flush=True)
    _set_one_thread(True, real)
    record = {
        "device": device, "gpu": device_name(device), "commit": git_commit(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "rounds": rounds,
        "median_s": {n: {k: statistics.median(v) for k, v in t.items()}
                     for n, t in times.items()},
        "all_s": times, "C10": c10}
    with open(out, "w") as f:
        json.dump(record, f, indent=1)
    print(json.dumps(record["median_s"], indent=1))


if __name__ == "__main__":
    main()

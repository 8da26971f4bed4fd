"""CPU engine benchmark: 64×64 scan × 64×64 detector (simulated, known truth).

Times one candidate evaluation (alone and in a batch of 100), the exact derivatives of
3 Newton starts, the full-field fit (both rotation branches, 200 trials + Newton), a
32×32 region fit and the Auto reconstruction, through the public Session API.

    PYTHONPATH=python python benchmarks/cpu_engine.py \
        [--json benchmarks/results/cpu-engine-DATE.json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import time
from pathlib import Path

import numpy as np


def _median_time(fn, repeat: int = 5) -> float:
    fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def main() -> None:
    from livessb import Session, __version__
    from livessb.bench.report import git_commit
    from livessb.engine.cpu import CPUEngine
    from livessb.physics.geometry import estimate_rotation
    from livessb.simulate import simulate_4dstem

    today = dt.date.today().isoformat()
    p = argparse.ArgumentParser()
    p.add_argument("--json", default=f"benchmarks/results/cpu-engine-{today}.json")
    p.add_argument("--trials", type=int, default=200)
    a = p.parse_args()

    t0 = time.perf_counter()
    ds, truth = simulate_4dstem(
        scan_shape=(64, 64), detector_shape=(64, 64), scan_step_A=0.6,
        aberrations={"C10": -60.0, "C12": 15.0, "phi12": 0.5}, depth_A=40.0,
        tilt_mrad=(3.0, -2.0), slice_A=20.0, defocus_gradient=(0.0, 0.5), rotation_deg=12.0,
        dose=5e4, seed=2026)
    t_sim = time.perf_counter() - t0
    out: dict = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                 "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                             "processor": platform.processor(),
                             "python": platform.python_version()},
                 "versions": {"livessb": __version__, "numpy": np.__version__},
                 "workload": {"scan": [64, 64], "detector": [64, 64], "trials": a.trials,
                              "simulate_s": t_sim}}
    try:
        import numba

        out["versions"]["numba"] = numba.__version__
    except ImportError:
        pass
    out["commit"] = git_commit()

    eng = CPUEngine(ds)
    rot = estimate_rotation(eng.bf_center_of_mass(), ds.scan_step_A)
    t0 = time.perf_counter()
    sp = eng.prepare(None)
    eng.set_rotation(sp, rot.theta, rot.transpose)
    out["prepare_and_rotation_s"] = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    cand = np.column_stack([rng.uniform(-500, 500, 100), rng.uniform(0, 100, 100),
                            rng.uniform(-1.5, 1.5, 100), rng.uniform(-15, 15, 100),
                            rng.uniform(-15, 15, 100), rng.uniform(0, 500, 100)])
    out["n_bf"] = sp.n_bf
    out["evaluate_1_s"] = _median_time(lambda: eng.evaluate(sp, cand[:1]))
    out["evaluate_100_per_candidate_s"] = _median_time(lambda: eng.evaluate(sp, cand), 3) / 100
    out["derivatives_3_s"] = _median_time(lambda: eng.derivatives(sp, cand[:3]), 3)
    eng.close()

    s = Session(ds, device="cpu")
    t0 = time.perf_counter()
    full = s.fit(trials=a.trials, seed=42, progress=False)
    out["fit_full_both_branches_s"] = time.perf_counter() - t0
    out["fit_full_timings"] = full.timings
    out["fit_full_params"] = full.params
    t0 = time.perf_counter()
    s.reconstruct()
    out["reconstruct_auto_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    reg = s.fit_region((16, 48, 16, 48), trials=a.trials, seed=42)
    out["region_32_s"] = time.perf_counter() - t0
    out["region_32_timings"] = reg.timings
    t0 = time.perf_counter()
    s.close()
    out["close_s"] = time.perf_counter() - t0
    out["truth"] = truth.params
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps(out, indent=1, default=str))
    for k in ("evaluate_1_s", "evaluate_100_per_candidate_s", "derivatives_3_s",
              "fit_full_both_branches_s", "reconstruct_auto_s", "region_32_s", "close_s"):
        print(f"{k:32s} {out[k]:.4f}")


if __name__ == "__main__":
    main()

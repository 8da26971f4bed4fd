"""Bias of small region fits over many noise realisations of the demo (docs/bias-matrix.md
§13): the demo simulated once without noise (our simulator, 96² × 48², 0.6 Å steps, C10
−82…−18 Å across the scan), Poisson counts drawn at ``--dose`` per seed, the full field
fitted, then the 3 × 3 grid of ``--size``² regions under each setting. Per region: the
noise-free fit, the mean ΔC10 over the seeds ± its standard error, the share within two
errors. One realisation (``region_coverage.py``) cannot tell a bias of 1 Å from the noise of
±2 Å errors; 16 can.

    python scripts/region_bias_seeds.py --seeds 16 --json out.json   # ~9 min (2 cores)
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np
from region_coverage import SETTINGS, region_grid

from livessb import Session
from livessb.dataset import Dataset4D
from livessb.simulate.demo import DEMO_SETTINGS
from livessb.simulate.forward import simulate_4dstem


def region_fits(ds: Dataset4D, label: str, regions: list[tuple[int, int, int, int]],
                trials: int) -> list[tuple[float, float]]:
    """(C10, its error) of each region under one setting."""
    alias, window = SETTINGS[label]
    with Session(ds, device="cpu", alias_pixels=alias, scan_window=window) as s:
        s.fit(trials=trials, seed=1, progress=False)
        return [(r.params["C10"], r.errors["C10"]) for r in
                (s.fit_region(b, trials=trials, seed=1).fit for b in regions)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--seeds", type=int, default=16)
    ap.add_argument("--dose", type=float, default=5e4)
    ap.add_argument("--settings", nargs="+", default=["kept/hann", "excluded/hann"],
                    choices=list(SETTINGS))
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--json", help="write every fit here")
    args = ap.parse_args()
    free, truth = simulate_4dstem(**{**DEMO_SETTINGS, "dose": None})
    expected = np.asarray(free.counts, dtype=np.float64) * args.dose
    regions = region_grid(truth.scan_shape, args.size, 3)
    true_C10 = np.array([truth.local_params(b)["C10"] for b in regions])
    record: dict[str, Any] = {"size": args.size, "dose": args.dose, "regions": regions,
                              "true_C10": true_C10.tolist(), "settings": {}}
    for label in args.settings:
        noise_free = np.array(region_fits(free, label, regions, args.trials))[:, 0] - true_C10
        runs = []
        for seed in range(args.seeds):
            counts = np.random.default_rng(1000 + seed).poisson(expected).astype(np.uint16)
            ds = Dataset4D(counts, voltage_kV=free.voltage_kV, semiangle_mrad=free.semiangle_mrad,
                           scan_step_A=free.scan_step_A,
                           detector_sampling_mrad=free.detector_sampling_mrad)
            runs.append(region_fits(ds, label, regions, args.trials))
            print(f"{label}: seed {seed + 1}/{args.seeds}", flush=True)
        fits = np.array(runs)  # (seeds, regions, 2)
        delta, error = fits[..., 0] - true_C10, fits[..., 1]
        print(f"{label}, {args.size}², {args.dose:.0e} e⁻, {args.seeds} seeds: ΔC10 Å")
        for i, b in enumerate(regions):
            d = delta[:, i]
            print(f"  {b}: truth {true_C10[i]:+6.1f}  noise-free {noise_free[i]:+.2f}  "
                  f"mean {d.mean():+.2f} ± {d.std(ddof=1) / np.sqrt(len(d)):.2f}  "
                  f"error {error[:, i].mean():.2f}  within 2 errors "
                  f"{np.mean(np.abs(d / error[:, i]) <= 2):.2f}")
        print(f"  all: mean {delta.mean():+.2f} (noise-free {noise_free.mean():+.2f}), "
              f"within 2 errors {np.mean(np.abs(delta / error) <= 2):.3f}", flush=True)
        record["settings"][label] = {"noise_free": noise_free.tolist(),
                                     "delta": delta.tolist(), "error": error.tolist()}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()

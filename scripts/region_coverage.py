"""Do the errors of small region fits cover the truth? A grid of regions on the demo dataset
(our simulator: 96² × 48², 0.6 Å steps, so aliased; a weak crystal whose region windows hold
few lattice periods), each fitted under every model setting asked for, against the known
truth (C10 at the region's centre: the demo has a defocus gradient). docs/bias-matrix.md §12.

    python scripts/region_coverage.py                       # 16² regions, the four settings
    python scripts/region_coverage.py --size 32 --json out.json
    python scripts/region_coverage.py --dose 5e5      # the demo simulated at another dose
    python scripts/region_coverage.py --dose 0        # ... without noise
    python scripts/region_coverage.py --settings kept/none lattice  # crystal mode too
"""

from __future__ import annotations

import argparse
import json
import math
from itertools import product
from typing import Any

from bias_matrix import deviation  # (scripts/: the matrix's own Δ, phi12 modulo π)

from livessb import Session
from livessb.simulate.demo import DEMO_SETTINGS, demo_dataset
from livessb.simulate.forward import simulate_4dstem

SETTINGS = {"kept/none": ("kept", "none", "per_bin"),
            "excluded/none": ("excluded", "none", "per_bin"),
            "kept/hann": ("kept", "hann", "per_bin"),
            "excluded/hann": ("excluded", "hann", "per_bin"),
            "kept/auto": ("kept", "auto", "per_bin"),  # the window check's advice (§10)
            "lattice": ("kept", "none", "lattice")}  # crystal mode (docs/bias-matrix.md §15)
DEFAULT_SETTINGS = ["kept/none", "excluded/none", "kept/hann", "excluded/hann"]


def region_grid(scan: tuple[int, int], size: int,
                per_axis: int) -> list[tuple[int, int, int, int]]:
    """``per_axis``² regions of ``size``² spread evenly over the scan, corners included."""
    starts = [[round(i * (n - size) / (per_axis - 1)) for i in range(per_axis)] for n in scan]
    return [(r, r + size, c, c + size) for r, c in product(*starts)]


def z_scores(params: dict[str, float], errors: dict[str, float],
             truth: dict[str, float]) -> dict[str, float]:
    """Each deviation (phi12 on its circle of period π) in units of its error."""
    return {name: deviation(name, params[name], true) / errors[name] if errors.get(name)
            else math.inf for name, true in truth.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=16, help="region side, scan px (default 16)")
    ap.add_argument("--per-axis", type=int, default=3, help="regions per scan axis (3)")
    ap.add_argument("--settings", nargs="+", default=DEFAULT_SETTINGS, choices=list(SETTINGS))
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--dose", type=float, default=None,
                    help="simulate the demo at this dose (e⁻ per position; 0: no noise) "
                         "instead of the embedded 5·10⁴")
    ap.add_argument("--json", help="write every fit's Δ, error and z here")
    args = ap.parse_args()
    if args.dose is None:
        ds, truth = demo_dataset(with_truth=True)
    else:
        ds, truth = simulate_4dstem(**{**DEMO_SETTINGS, "dose": args.dose or None})
    regions = region_grid(truth.scan_shape, args.size, args.per_axis)
    record: dict[str, Any] = {"size": args.size, "dose": truth.dose, "regions": regions,
                              "settings": {}}
    for label in args.settings:
        alias, window, object_model = SETTINGS[label]
        rows: list[dict[str, Any]] = []
        with Session(ds, device="cpu", alias_pixels=alias, scan_window=window) as s:
            s.fit(trials=args.trials, seed=1)
            for b in regions:
                r = s.fit_region(b, trials=args.trials, seed=1, object_model=object_model).fit
                true = {n: truth.local_params(b)[n] for n in ("C10", "C12", "phi12")}
                z = z_scores(r.params, r.errors, true)
                rows.append({"bounds": b, "C10": r.params["C10"], "C10_true": true["C10"],
                             "C10_error": r.errors["C10"], "z": z})
                print(f"{label:14s} {b}: C10 {r.params['C10']:+7.2f} ± {r.errors['C10']:.2f} "
                      f"for {true['C10']:+7.2f} (z {z['C10']:+.1f}), z C12 {z['C12']:+.1f}, "
                      f"phi12 {z['phi12']:+.1f}", flush=True)
        within = {n: int(sum(abs(row["z"][n]) <= 2 for row in rows))
                  for n in ("C10", "C12", "phi12")}
        print(f"{label}: within ±2 errors of {len(rows)}: {within}", flush=True)
        record["settings"][label] = {"fits": rows, "within_2_errors": within}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()

"""Which detector orientation do the losses pick, and when do they say they cannot tell?
(docs/uncertainty.md "The detector orientation", fit/transpose_choice.py)

Our simulator's SrTiO3-like crystal (48² detector, 0.6 Å steps, rotation 12°, no transpose,
C10 -82, C12 15 Å at 5·10⁴ e⁻ by default), several scan sizes and noise draws, each fitted
with both orientations as if the COM curl's halves disagreed (``--force-both``, the
default: that is what the test must get right; without it only the draws the curl leaves
undecided are compared). One row per fit: the verdict's z, who decided, whether the
orientation kept is the true one, ΔC10.

    python scripts/transpose_choice_matrix.py                         # 16 24 32 48, 4 draws, ~6 min
    python scripts/transpose_choice_matrix.py --window hann --sizes 16 24
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

import livessb.fit.full_field as full_field
from livessb import Session
from livessb.physics.geometry import RotationEstimate, estimate_rotation
from livessb.simulate.forward import simulate_4dstem


def _undecided(rot: RotationEstimate) -> RotationEstimate:
    """The curl's estimate with one half of the scan dissenting: both orientations fitted."""
    return dataclasses.replace(rot, halves_transposes=(rot.transpose,) * 3 + (not rot.transpose,))


def fit_row(size: int, draw: int, args: argparse.Namespace) -> dict[str, Any]:
    truth = {"C10": args.c10, "C12": 15.0, "phi12": 0.5}
    ds, _ = simulate_4dstem(scan_shape=(size, size), detector_shape=(48, 48), scan_step_A=0.6,
                            aberrations=truth, rotation_deg=12.0, dose=args.dose, seed=draw)
    with Session(ds, device="cpu", scan_window=args.window) as s:
        fit = s.fit(trials=200, seed=1, progress=False)
    record = fit.provenance
    return {"size": size, "draw": draw, "window": args.window, "z": record["transpose_z"],
            "chosen_by": record["transpose_chosen_by"],
            "determined": record["transpose_determined"], "right": fit.transpose is False,
            "delta_C10": fit.params["C10"] - truth["C10"],
            "candidates": [{k: c[k] for k in ("transpose", "loss", "params")}
                           for c in record["transpose_candidates"]]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[16, 24, 32, 48])
    ap.add_argument("--draws", type=int, default=4, help="noise draws (simulator seeds 0…)")
    ap.add_argument("--dose", type=float, default=5e4)
    ap.add_argument("--c10", type=float, default=-82.0)
    ap.add_argument("--window", choices=("none", "hann"), default="none")
    ap.add_argument("--curl-only", action="store_true",
                    help="compare only where the curl itself is undecided")
    ap.add_argument("--json", help="write every row here")
    args = ap.parse_args()
    if not args.curl_only:
        full_field.estimate_rotation = lambda com, step: _undecided(estimate_rotation(com, step))
    rows = []
    print("| scan | draw | z | decided by | orientation | ΔC10 Å |\n|---|---|---|---|---|---|")
    for size in args.sizes:
        for draw in range(args.draws):
            row = fit_row(size, draw, args)
            rows.append(row)
            z = "—" if row["z"] is None else f"{row['z']:+.2f}"
            verdict = row["chosen_by"] + ("" if row["determined"] else " (not determined)")
            print(f"| {size}² | {draw} | {z} | {verdict} | {'right' if row['right'] else 'WRONG'} "
                  f"| {row['delta_C10']:+.2f} |", flush=True)
    wrong = sum(not r["right"] for r in rows)
    flagged = sum(not r["determined"] for r in rows)
    print(f"\n{len(rows)} fits: {wrong} kept the wrong orientation, {flagged} say the "
          "orientation is not determined")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

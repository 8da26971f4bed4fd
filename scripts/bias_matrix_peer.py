"""The peer's column of the bias matrix (issue 20): quantem's direct ptychography on each
case, run as its own documentation describes an aberration fit: an Optuna search (TPE) of
the SSB residual over C10, C12 and phi12, then an L-BFGS polish of the three by autograd
(`DirectPtychography.optimize_hyperparameters`, `fit_hyperparameters_gradient`).

    PEER/bin/python scripts/bias_matrix_peer.py OUT.json TRIALS CASE.npz [CASE.npz ...]

Runs in its own interpreter (quantem needs torch; it is not a dependency of livessb):
    python -m venv V && V/bin/pip install torch==2.14.1 torchvision==0.29.1 quantem==0.1.10

What it is given, and so what its column measures:
- the counts as float32, the scan step (Å) and the detector's angular sampling (mrad),
  the beam energy and the probe's semiangle: the calibration the case file holds;
- the true detector rotation (0°, abTEM's) held fixed: it does not search it (ours does);
- a pure-phase object (its default, `obj_type="pure_phase"`);
- no tilt and no thickness: it fits neither, so its column has C10, C12 and phi12 only.
The search box and the number of trials are ours (`DEFAULT_BOX`: C10 ±500 Å, C12 0–100 Å,
phi12 ±π/2; 200 trials in the matrix), TPE seeded with 1; one torch thread per process.
Its results are in abTEM's convention, which is ours (C10 < 0 underfocus, phi12 from the
same axis: checked on the thin cases, where both land within an ångström of the truth).
OUT.json gets one row per case, rewritten after each.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

# livessb.params.DEFAULT_BOX (the peer's interpreter has no livessb)
BOX = {"C10": (-500.0, 500.0), "C12": (0.0, 100.0), "phi12": (-math.pi / 2, math.pi / 2)}


def _read(out: Path) -> list[dict[str, Any]]:
    return json.loads(out.read_text()) if out.exists() else []


def _write(out: Path, rows: list[dict[str, Any]]) -> None:
    """Atomically: an interrupted run keeps the fits written before it."""
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(rows, indent=1))
    tmp.replace(out)


def fit_case(path: Path, trials: int) -> dict[str, Any]:
    import optuna
    import quantem
    from quantem.core.datastructures import Dataset4dstem
    from quantem.diffractive_imaging.direct_ptychography import (
        DirectPtychography,
        OptimizationParameter,
    )

    d = np.load(path)
    step = [float(s) for s in d["scan_step_A"]]
    mrad = float(d["detector_sampling_mrad"])
    ds = Dataset4dstem.from_array(d["counts"].astype(np.float32),
                                  sampling=[step[0], step[1], mrad, mrad],
                                  units=["A", "A", "mrad", "mrad"])
    t0 = time.perf_counter()
    dp = DirectPtychography.from_dataset4d(
        ds, energy=float(d["voltage_kV"]) * 1e3, semiangle_cutoff=float(d["semiangle_mrad"]),
        rotation_angle=0.0, verbose=False, rng=1)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dp.optimize_hyperparameters(
        aberration_coefs={k: OptimizationParameter(lo, hi) for k, (lo, hi) in BOX.items()},
        rotation_angle=0.0, n_trials=trials, sampler=optuna.samplers.TPESampler(seed=1),
        verbose=False)
    searched = {k: float(v) for k, v in dp.hyperparameter_state.current_aberrations().items()}
    dp.fit_hyperparameters_gradient(parameters=tuple(BOX), verbose=False)
    fitted = {k: float(v) for k, v in dp.hyperparameter_state.current_aberrations().items()}
    return {"case": path.stem, "tool": f"quantem {quantem.__version__}", "trials": trials,
            "searched": {k: searched[k] for k in BOX}, "fit": {k: fitted[k] for k in BOX},
            "fit_s": time.perf_counter() - t0}


def peer_rows(peer_python: str, paths: list[Path], out: Path, trials: int) -> list[dict[str, Any]]:
    """The peer's fits of ``paths`` (from ``out``, a cache; the missing ones run now in
    ``peer_python``, one process per core)."""
    cached = _read(out)
    have = {r["case"] for r in cached if r["trials"] == trials}
    todo = [str(p) for p in paths if p.stem not in have]
    if todo and not Path(peer_python).is_file():
        sys.exit(f"--peer-python {peer_python}: no such interpreter; make one with "
                 "python -m venv V && V/bin/pip install torch==2.14.1 torchvision==0.29.1 "
                 "quantem==0.1.10")
    workers = [todo[i::2] for i in range(2) if todo[i::2]]
    parts = [out.with_name(f"{out.stem}.{i}.json") for i in range(len(workers))]
    procs = [subprocess.Popen([peer_python, __file__, str(part), str(trials), *cases])
             for part, cases in zip(parts, workers, strict=True)]
    if any(p.wait() for p in procs):
        sys.exit("the peer's fits failed: see its output above")
    rows = cached
    for part in parts:
        new = json.loads(part.read_text())
        fresh = {r["case"] for r in new}
        rows = [r for r in rows if r["case"] not in fresh] + new
        part.unlink()
    _write(out, rows)
    want = {p.stem for p in paths}
    return [r for r in rows if r["case"] in want and r["trials"] == trials]


def canonical(fit: dict[str, float]) -> dict[str, float]:
    """(C10, C12, phi12) with C12 ≥ 0: the peer's L-BFGS may cross C12 = 0, and
    (-C12, phi12) is the aberration (C12, phi12 + π/2)."""
    if fit["C12"] >= 0:
        return dict(fit)
    phi = (fit["phi12"] + math.pi / 2 + math.pi / 2) % math.pi - math.pi / 2
    return {**fit, "C12": -fit["C12"], "phi12": phi}


def peer_table(ours: list[dict[str, Any]], peer: list[dict[str, Any]]) -> str:
    """Ours against the peer on the cases both fitted: Δ of C10, C12, phi12 (mrad) against
    the same truth (the peer's C12 made non-negative), |ΔC10| against the issue's target,
    and the time of each fit."""
    from bias_matrix import c10_target_A, deviation  # (its module imports this one lazily)

    by_case = {r["case"]: r for r in peer}
    rows = [(r, by_case[r["case"]]) for r in ours if r["case"] in by_case]
    if not rows:
        return ""
    tool = rows[0][1]["tool"]
    lines = [f"| case | truth C10 | C10 target Å | ΔC10 Å: ours / {tool} | ΔC12 Å | "
             "Δφ12 mrad | fit s |", "|---|---|---|---|---|---|---|"]
    met = [0, 0]
    for r, q in rows:
        t = c10_target_A(r)
        cells = [r["case"], f"{r['C10']['truth']:.1f}", f"{t:.2f}"]
        for name, scale in (("C10", 1.0), ("C12", 1.0), ("phi12", 1000.0)):
            mine = r[name]["delta"]
            theirs = deviation(name, canonical(q["fit"])[name], r[name]["truth"])
            marks = ["", ""]
            if name == "C10":
                for i, d in enumerate((mine, theirs)):
                    met[i] += abs(d) <= t
                    marks[i] = " ✓" if abs(d) <= t else " ✗"
            cells.append(f"{mine * scale:+.2f}{marks[0]} / {theirs * scale:+.2f}{marks[1]}")
        cells.append(f"{r['fit_s']:.1f} / {q['fit_s']:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    n = len(rows)
    return ("\n".join(lines) + f"\n\n|ΔC10| within the target: ours {met[0]}/{n}, "
            f"{tool} {met[1]}/{n} ({rows[0][1]['trials']} trials each; the peer then its "
            "L-BFGS polish at the true rotation, ours its Newton at the rotation it finds).\n")


def main() -> None:
    out, trials, paths = Path(sys.argv[1]), int(sys.argv[2]), [Path(p) for p in sys.argv[3:]]
    warnings.filterwarnings("ignore")  # its progress and deprecation chatter
    import torch

    torch.set_num_threads(1)  # the matrix runs one process per core
    rows = _read(out)
    done = {r["case"] for r in rows if r["trials"] == trials}
    for path in paths:
        if path.stem in done:
            continue
        row = fit_case(path, trials)
        print(f"{row['case']:28s} " + "  ".join(f"{k}={v:+.3f}" for k, v in row["fit"].items())
              + f"  {row['fit_s']:.0f} s", flush=True)
        rows = [r for r in rows if r["case"] != row["case"]] + [row]
        _write(out, rows)


if __name__ == "__main__":
    main()

"""The bias matrix (issue 20): fits on independent abTEM multislice cases, Δ and z of
every parameter against the simulator's truth, written as the table of docs/bias-matrix.md.

    python scripts/bias_matrix.py --abtem-python /work/abtem-venv/bin/python

simulates every missing case with abTEM 1.0 (``scripts/bias_matrix_simulate.py``,
cached in ``--cache``, default ~/.cache/livessb/bias-matrix: the files are too large
for git), fits each with ``Session.fit`` (CPU, 200 trials, seed 1; the exact detector
sampling given), once with the overlaps at the grid frequencies (the default) and once
at the effective ones (``scan_frequencies``), and writes both tables (``--out``) and a
JSON record next to it.
``--peer-python PATH`` adds the peer's column (quantem, ``scripts/bias_matrix_peer.py``).
``--only NAME...`` fits a subset; ``--loss`` picks the objective; ``--alias-pixels
excluded`` fits with the BF pixels an alias shares left out (``Session(alias_pixels=)``,
its own table); ``--scan-window hann`` fits the Hann-apodised spectra
(``Session(scan_window=)``, its own table). ``--dose E`` simulates every case at E
electrons per pattern instead (its own cache subfolder and table): at 10¹⁰ the counts'
noise is negligible and what is left of Δ is the model's bias, not the realisation's
noise. ``--fine-scan`` takes instead the near-focus series at 0.25 Å steps, a scan that
samples the BF disc's band (no aliases), weak and strong, and windows of whole lattice
periods (docs/bias-matrix.md §6).
``--commensurate`` takes instead one cell on scans of a/6 and a/8 steps, commensurate with
the lattice (docs/bias-matrix.md §11).
``--fine-detector`` takes instead the defocus series on a 4×-finer detector (BF radius 25 px, its
own cache subfolder): binned in software (``scripts/bias_profiles.py --pixels --bin 2|4``)
its pixels integrate 2×2 or 4×4 point samples, as a real detector's do (docs/bias-matrix.md
§5).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from bias_matrix_simulate import A_STO

from livessb.params import on_circle

ROOT = Path(__file__).resolve().parents[1]
PARAMS = ("C10", "C12", "phi12", "tilt_row_mrad", "tilt_col_mrad", "depth")
BASE: dict[str, Any] = {
    "structure": "srtio3", "cells_lateral": 4, "cells_z": 1, "abtem_C10": -80.0,
    "C12": 5.0, "phi12": 0.3, "tilt_mrad": [0.0, 0.0], "scan": 24, "step_A": 0.5,
    "dose": 2e5, "energy_eV": 200e3, "semiangle_mrad": 20.0, "bin": 1,
}


def _case(name: str, seed: int, **changes: Any) -> dict[str, Any]:
    return {**BASE, **changes, "name": name, "seed": seed}


def cases() -> list[dict[str, Any]]:
    out = [_case(f"sto1_C10{c:+.0f}", 100 + i, abtem_C10=float(c))
           for i, c in enumerate((-150, -120, -80, -40, -20, 20, 40, 80, 150))]
    out += [_case(f"sto{z}_C10-80", 120 + z, cells_z=z) for z in (3, 10, 40)]
    out += [_case("sto1_C12_40_phi-1.0", 130, C12=40.0, phi12=-1.0, abtem_C10=-60.0),
            _case("sto1_C12_20_phi1.2", 131, C12=20.0, phi12=1.2, abtem_C10=-60.0),
            _case("sto1_C12_30_phi0.0_over", 132, C12=30.0, phi12=0.0, abtem_C10=60.0)]
    out += [_case("weak_slab150_tilt8-4", 140, cells_z=38, total_phase_rad=0.3,
                  abtem_C10=-120.0, C12=15.0, phi12=-0.4, tilt_mrad=[8.0, -4.0]),
            _case("weak_slab150_tilt-10+3", 141, cells_z=38, total_phase_rad=0.3,
                  abtem_C10=-60.0, C12=8.0, phi12=0.9, tilt_mrad=[-10.0, 3.0]),
            _case("amorphous150_tilt8-4", 142, structure="amorphous", thickness_A=150.0,
                  abtem_C10=-120.0, C12=10.0, phi12=0.5, tilt_mrad=[8.0, -4.0])]
    out += [_case("sto1_det9px", 150, cells_lateral=3),
            _case("sto1_det25px", 151, cells_lateral=8),
            _case("sto1_det50px", 152, cells_lateral=16, scan=20),
            _case("sto1_det6px_binned", 153, bin=2)]
    out += [_case("sto1_step0.3", 160, step_A=0.3, scan=32),
            _case("sto1_step0.6", 161, step_A=0.6)]
    out += [_case("sto1_dose1e4", 170, dose=1e4), _case("sto1_dose1e6", 171, dose=1e6)]
    return out


def fine_detector_cases() -> list[dict[str, Any]]:
    """The defocus series on a detector sampled 4× finer than BASE's (BF radius 25 px)."""
    return [_case(f"sto1_fine8_C10{c:+.0f}", 180 + i, abtem_C10=float(c), cells_lateral=8)
            for i, c in enumerate((-150, -80, -40, -20, 20, 80, 150))]


def commensurate_cases() -> list[dict[str, Any]]:
    """One cell on scans commensurate with the lattice (docs/bias-matrix.md §11): steps of
    a/6 (0.6508 Å, every alias of a reflection is another reflection) across defocus, and
    a/8 (0.488 Å) at -80; 24 positions (4 and 3 periods: no leakage)."""
    a6 = [_case(f"sto1_a6_C10{c:+.0f}", 300 + i, abtem_C10=float(c), step_A=A_STO / 6)
          for i, c in enumerate((-120, -80, -40, 40, 80))]
    return [*a6, _case("sto1_a8_C10-80", 310, step_A=A_STO / 8)]


def fine_scan_cases() -> list[dict[str, Any]]:
    """The near-focus series at 0.25 Å steps over BASE's 12 Å field (48 positions): the
    scan samples the BF disc's band (Nyquist 2.0 Å⁻¹ > 2kα = 1.59), so no bin holds an
    alias; BASE's 0.5 Å steps (Nyquist 1.0) alias (docs/bias-matrix.md §6). Each defocus
also with the potential scaled to a 0.05 rad peak phase (a weak object)."""
    defocus = (-80, -40, -20, 20, 40, 80)
    strong = [_case(f"sto1_scan025_C10{c:+.0f}", 200 + i, abtem_C10=float(c), step_A=0.25,
                    scan=48) for i, c in enumerate(defocus)]
    # the same with the potential scaled to 0.05 rad: no second-order terms
    weak = [_case(f"weak1_scan025_C10{c:+.0f}", 210 + i, abtem_C10=float(c), step_A=0.25,
                  scan=48, total_phase_rad=0.05) for i, c in enumerate(defocus)]
    # 48 positions over four lattice periods (0.3254 Å steps): no window leakage either
    step = 4 * A_STO / 48
    periodic = [_case(f"{kind}1_periodic_C10{c:+.0f}", 220 + i + 10 * j, abtem_C10=float(c),
                      step_A=step, scan=48, **extra)
                for j, (kind, extra) in enumerate((("weak", {"total_phase_rad": 0.05}),
                                                   ("sto", {})))
                for i, c in enumerate((-80, -40, 40, 80))]
    # the weak object over 3 and 3.5 periods (0.2441, 0.2847 Å steps): integer or not
    periods = [_case(f"weak1_{n:g}periods_C10{c:+.0f}", 240 + i + 10 * j, abtem_C10=float(c),
                     step_A=n * A_STO / 48, scan=48, total_phase_rad=0.05)
               for j, n in enumerate((3.0, 3.5)) for i, c in enumerate((-80, 80))]
    # the weak object over 3.07 and 6.07 periods on a detector of BF radius 25 px (8×8
    # cells laterally: the scan fits inside the potential): how the leakage falls
    longer = [_case(f"weak8_{per:g}p_C10{c:+.0f}", 270 + 2 * i + j, abtem_C10=float(c),
                    step_A=per * A_STO / scan, scan=scan, cells_lateral=8,
                    total_phase_rad=0.05)
              for i, (per, scan) in enumerate(((3.07, 48), (6.07, 96)))
              for j, c in enumerate((-80, 80))]
    return strong + weak + periodic + periods + longer


def simulate_missing(all_cases: list[dict[str, Any]], cache: Path, abtem_python: str) -> None:
    missing = [c for c in all_cases if not (cache / f"{c['name']}.npz").exists()]
    if not missing:
        return
    if not abtem_python:
        sys.exit(f"{len(missing)} cases are not simulated yet ({missing[0]['name']}, ...): "
                 "give --abtem-python PATH, an interpreter with abTEM 1.0 "
                 "(python -m venv V && V/bin/pip install abtem==1.0.11)")
    cache.mkdir(parents=True, exist_ok=True)
    spec = cache / "cases.json"
    spec.write_text(json.dumps(missing, indent=1))
    subprocess.run([abtem_python, str(ROOT / "scripts" / "bias_matrix_simulate.py"),
                    str(spec), str(cache)], check=True)


def deviation(name: str, value: float, truth: float) -> float:
    """value − truth, the shorter way round an angle's circle (phi12: period π)."""
    return on_circle(name, value - truth)


def fit_case(path: Path, loss: str, trials: int, frequencies: str = "grid",
             alias_pixels: str = "kept", scan_window: str = "none",
             object_model: str = "per_bin", bin_detector: int = 1,
             detector_pixels: str = "auto") -> dict[str, Any]:
    import livessb

    d = np.load(path)
    if detector_pixels == "auto":  # abTEM reads each pixel at its centre; binned pixels
        # sum their bins (the case's own binning, or --bin-detector's)
        binned = int(json.loads(str(d["case_json"])).get("bin", 1)) > 1 or bin_detector > 1
        detector_pixels = "integrating" if binned else "points"
    ds = livessb.load(path, bin_detector=bin_detector if bin_detector > 1 else None)
    ds.detector_pixels = detector_pixels
    truth = {p: float(d[f"truth_{p}"]) for p in PARAMS}
    t0 = time.perf_counter()
    with livessb.Session(ds, device="cpu", scan_frequencies=frequencies,
                         alias_pixels=alias_pixels, scan_window=scan_window) as s:
        fit = s.fit(trials=trials, seed=1, objective=loss, progress=False,
                    object_model=object_model)
    row: dict[str, Any] = {"case": path.stem, "fit_s": time.perf_counter() - t0,
                           "loss": fit.loss, "rotation_deg": fit.rotation_deg,
                           "transpose": fit.transpose, "undetermined": fit.undetermined,
                           "kept": fit.provenance.get("model_choice", {}).get("kept"),
                           "bf_radius_px": float(d["bf_radius_px"]) / bin_detector,
                           "detector_pixels": detector_pixels,
                           "thickness_A": float(d["thickness_A"]),
                           "phase_peak_rad": float(d["phase_peak_rad"])}
    for p in PARAMS:
        delta = deviation(p, fit.params[p], truth[p])
        err = fit.errors.get(p, float("nan"))
        row[p] = {"truth": truth[p], "fit": fit.params[p], "delta": delta, "error": err,
                  "systematic": fit.errors_systematic.get(p, float("nan")),
                  "z": delta / err if err and err > 0 else float("nan")}
    if fit.lattice:  # crystal mode: its pairs of estimates and their systematic parts
        row["lattice"] = {k: v for k, v in fit.lattice.items()
                          if k not in ("per_bin", "basis_inv_A")}
        if "per_bin" in fit.lattice:  # its systematic part, one of crystal mode's
            row["lattice"]["per_bin_errors_systematic"] = fit.lattice["per_bin"][
                "errors_systematic"]
    check = fit.provenance.get("window_check")
    if check is not None:  # a "hann" fit: the unapodised one refined from it, compared
        row["window_check"] = check
        for p in ("C10", "C12", "phi12"):
            err = check["errors_unapodised"].get(p, float("nan"))
            delta = deviation(p, check["unapodised"][p], truth[p])
            row[p]["unapodised"] = {"delta": delta, "error": err,
                                    "z": delta / err if err and err > 0 else float("nan")}
    return row


def by_window_check(rows: list[dict[str, Any]]) -> str:
    """The check's verdicts and the matrix with each case at the window it recommends."""
    checked = [r for r in rows if "window_check" in r]
    if not checked:
        return ""
    leak = sum(r["window_check"]["leakage"] for r in checked)
    chosen = [(r, r["window_check"]["recommended"]) for r in checked]
    n_none = sum(w == "none" for _, w in chosen)

    def entry(r: dict[str, Any], p: str, w: str) -> dict[str, Any]:
        return r[p]["unapodised"] if w == "none" else r[p]

    met = sum(abs(entry(r, "C10", w)["delta"]) <= c10_target_A(r) for r, w in chosen)
    cover = {p: sum(abs(entry(r, p, w)["delta"]) <= 2 * entry(r, p, w)["error"]
                    for r, w in chosen if p not in r["undetermined"])
             for p in ("C10", "C12", "phi12")}
    n_det = {p: sum(p not in r["undetermined"] for r in checked) for p in cover}
    names = ", ".join(f"{r['case']} ({r['window_check']['p_value']:.1g})"
                      for r in checked if r["window_check"]["leakage"])
    return (f"Window check (fit.window_check): leakage seen in {leak}/{len(checked)} "
            f"({names or 'none'}); 'none' recommended in {n_none}. At the recommended "
            f"window: |ΔC10| within the target {met}/{len(checked)}, truth within ±2 "
            "errors " + ", ".join(f"{p} {cover[p]}/{n_det[p]}" for p in cover) + ".")


def coverage(rows: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """Per parameter: (cases with the truth within ±2 errors, cases that determine it)."""
    out = {}
    for p in PARAMS:
        claimed = [r[p] for r in rows if p not in r["undetermined"] and r[p]["error"] > 0]
        out[p] = (sum(abs(e["delta"]) <= 2 * e["error"] for e in claimed), len(claimed))
    return out


def c10_target_A(row: dict[str, Any]) -> float:
    """Issue 20 item 2's bound on |ΔC10|: max(1 % of |C10|, 0.5 Å, 1 % of the thickness)."""
    return max(0.01 * abs(row["C10"]["truth"]), 0.5, 0.01 * row["thickness_A"])


def coverage_line(rows: list[dict[str, Any]]) -> str:
    cells = [f"{p} {k}/{n}" for p, (k, n) in coverage(rows).items()]
    met = sum(abs(r["C10"]["delta"]) <= c10_target_A(r) for r in rows)
    return ("Truth within ±2 errors, of the cases that determine the parameter: "
            + ", ".join(cells) + f". |ΔC10| within the target: {met}/{len(rows)}.")


def _cell(entry: dict[str, Any], name: str, undetermined: bool = False) -> str:
    scale = 1.0 if name != "phi12" else 1000.0  # phi12 in mrad
    return f"{entry['delta'] * scale:+.2f} ({entry['z']:+.1f}){' n.d.' if undetermined else ''}"


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| case | BF px | t Å | truth C10 | C10 target Å | ΔC10 Å (z) | ΔC12 Å (z) | "
            "Δφ12 mrad (z) | Δτr mrad (z) | Δτc mrad (z) | Δdepth Å (z) | loss |")
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        target = c10_target_A(r)
        mark = "✓" if abs(r["C10"]["delta"]) <= target else "✗"
        cells = [r["case"], f"{r['bf_radius_px']:.1f}", f"{r['thickness_A']:.0f}",
                 f"{r['C10']['truth']:.1f}", f"{target:.2f} {mark}"] + [
                     _cell(r[p], p, p in r["undetermined"] and r[p]["error"] > 0)
                     for p in PARAMS] + [f"{r['loss']:.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, allow_abbrev=False,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--abtem-python", default=os.environ.get("ABTEM_PYTHON", ""))
    ap.add_argument("--cache", type=Path,
                    default=Path.home() / ".cache" / "livessb" / "bias-matrix")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bias-matrix-table.md")
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--loss", default="vp", help="the objective (Session.fit objective=)")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--scan-frequencies", default="both",
                    choices=("grid", "effective", "both"))
    ap.add_argument("--alias-pixels", default="kept", choices=("kept", "excluded"),
                    help="Session(alias_pixels=): 'excluded' leaves out the BF pixels an "
                         "alias of an undersampled scan shares (physics.aliases)")
    ap.add_argument("--scan-window", default="none", choices=("none", "hann"),
                    help="Session(scan_window=): 'hann' fits the apodised spectra "
                         "(physics.apodisation)")
    ap.add_argument("--object-model", default="per_bin", choices=("per_bin", "lattice"),
                    help="Session.fit(object_model=): 'lattice' refines each fit on the "
                         "lattice model (crystal mode, fit.lattice)")
    ap.add_argument("--bin-detector", type=int, default=1, metavar="B",
                    help="sum B x B detector pixels of every case (an integrating detector "
                         "of B x B point samples a pixel; the cases' own files)")
    ap.add_argument("--detector-pixels", default="auto",
                    choices=("auto", "integrating", "points"),
                    help="how the fit reads the pixels (Dataset4D.detector_pixels); auto: "
                         "integrating where binned, points for abTEM's own sampling")
    ap.add_argument("--dose", type=float, default=None,
                    help="electrons per pattern for every case (e.g. 1e10: noise-free)")
    ap.add_argument("--fine-detector", action="store_true",
                    help="the defocus series on a 4x-finer detector (fine_detector_cases)")
    ap.add_argument("--peer-python", default="",
                    help="an interpreter with quantem 0.1.10: adds its column "
                         "(scripts/bias_matrix_peer.py; cached in --cache)")
    ap.add_argument("--commensurate", action="store_true",
                    help="one cell on scans of a/6 and a/8 steps (commensurate_cases)")
    ap.add_argument("--fine-scan", action="store_true",
                    help="the near-focus series at 0.25 Å steps, no aliases (fine_scan_cases)")
    args = ap.parse_args()
    pool = (fine_detector_cases() if args.fine_detector
            else fine_scan_cases() if args.fine_scan
            else commensurate_cases() if args.commensurate else cases())
    chosen = [c for c in pool if args.only is None or c["name"] in args.only]
    name = "bias-matrix"  # the table's name and the cache's subfolders follow the options
    if args.fine_detector:
        args.cache = args.cache / "fine8"
        name += "-fine8"
    if args.fine_scan:
        args.cache = args.cache / "scan025"
        name += "-scan025"
    if args.commensurate:
        args.cache = args.cache / "commensurate"
        name += "-commensurate"
    if args.dose is not None:
        chosen = [{**c, "dose": args.dose} for c in chosen]
        tag = f"{args.dose:g}".replace("+", "")  # 1e+10 -> 1e10
        args.cache = args.cache / f"dose{tag}"
        name += f"-dose{tag}"
    if args.bin_detector > 1:  # the table's name only: the cases' files are binned on load
        name += f"-bin{args.bin_detector}"
    if args.detector_pixels != "auto":
        name += f"-read-as-{args.detector_pixels}"
    if args.alias_pixels != "kept":  # the table's name only: the data are the same
        name += f"-alias-{args.alias_pixels}"
    if args.scan_window != "none":
        name += f"-window-{args.scan_window}"
    if args.object_model != "per_bin":
        name += f"-{args.object_model}"
    if args.out == ap.get_default("out"):
        args.out = args.out.with_name(f"{name}-table.md")
    if not chosen:
        sys.exit(f"no case named {args.only}: choose from {[c['name'] for c in pool]}")
    simulate_missing(chosen, args.cache, args.abtem_python)
    modes = ("grid", "effective") if args.scan_frequencies == "both" else (args.scan_frequencies,)
    sections, record = [], {}
    model_note = (f", object_model='{args.object_model}'"
                  if args.object_model != "per_bin" else "")
    for mode in modes:
        rows = []
        for c in chosen:
            rows.append(fit_case(args.cache / f"{c['name']}.npz", args.loss, args.trials, mode,
                                 args.alias_pixels, args.scan_window, args.object_model,
                                 args.bin_detector, args.detector_pixels))
            r = rows[-1]
            print(f"{mode:9s} {r['case']:28s} "
                  + "  ".join(f"{p}={_cell(r[p], p)}" for p in PARAMS)
                  + f"  {r['fit_s']:.1f}s", flush=True)
        print(coverage_line(rows))
        print(by_window_check(rows))
        sections.append(f"### scan_frequencies='{mode}', alias_pixels='{args.alias_pixels}', "
                        f"scan_window='{args.scan_window}'{model_note}"
                        f"\n\n{table(rows)}\n\n"
                        f"{coverage_line(rows)}\n\n{by_window_check(rows)}\n")
        record[mode] = rows
    if args.peer_python:
        from bias_matrix_peer import peer_rows, peer_table

        paths = [args.cache / f"{c['name']}.npz" for c in chosen]
        peer = peer_rows(args.peer_python, paths, args.cache / "peer-quantem.json", args.trials)
        sections.append(f"### The peer, against scan_frequencies='{modes[-1]}'\n\n"
                        f"{peer_table(record[modes[-1]], peer)}")
    args.out.write_text("\n".join(sections))
    args.out.with_suffix(".json").write_text(json.dumps(record, indent=1, default=float))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

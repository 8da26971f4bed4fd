"""Command line: ``livessb demo | fit | benchmark``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from .atomic import atomic_write, atomic_write_text


def _write_json(path: str | Path, doc: dict[str, Any]) -> Path:
    return atomic_write_text(path, json.dumps(doc, indent=1, allow_nan=False, default=float))


def _write_png(path: Path, phase: Any) -> Path:
    from .render import phase_to_png

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as fh:
        fh.write(phase_to_png(phase))
    return path


def demo_regions(scan_shape: tuple[int, int]) -> dict[str, tuple[int, int, int, int]]:
    """Left and right thirds of the scan (the demo's defocus gradient runs along columns)."""
    rows, cols = scan_shape
    third = cols // 3
    return {"left": (rows // 8, rows - rows // 8, 2, third),
            "right": (rows // 8, rows - rows // 8, cols - third + 2, cols - 2)}


def run_demo_headless(out: Path, device: str, trials: int, seed: int) -> dict[str, Any]:
    from . import simulate
    from .session import Session

    ds, truth = simulate.demo_dataset(with_truth=True)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with Session(ds, device=device) as s:
        full = s.fit(trials=trials, seed=seed, progress=True)
        rec = s.reconstruct()
        _write_png(out / "full_phase.png", rec.phase)
        regions = {}
        for name, bounds in demo_regions(ds.scan_shape).items():
            reg = s.fit_region(bounds, trials=trials, seed=seed, region_id=name, progress=True)
            _write_png(out / f"region_{name}.png", reg.phase)
            regions[name] = {"bounds": list(bounds), "params": reg.params, "loss": reg.fit.loss,
                             "truth_C10": truth.local_C10(bounds),
                             "C10_error_A": reg.params["C10"] - truth.local_C10(bounds),
                             "timings": reg.timings}
        s.save_calibration(out / "calibration.json")
        summary = {
            "dataset": repr(ds), "device": s.device, "trials": trials, "seed": seed,
            "truth": truth.to_dict(),
            "full_field": {"params": full.params, "loss": full.loss,
                           "rotation_deg": full.rotation_deg, "transpose": full.transpose,
                           "rotation_error_deg": (full.rotation_deg - truth.rotation_deg + 180)
                           % 360 - 180, "timings": full.timings},
            "regions": regions, "upsample": rec.upsample, "phase_sha256": rec.phase_hash(),
            "total_s": time.perf_counter() - t0,
        }
    _write_json(out / "summary.json", summary)
    return summary


def _calibration_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    cal: dict[str, Any] = {}
    for key in ("voltage_kV", "semiangle_mrad", "detector_sampling_mrad"):
        if getattr(args, key) is not None:
            cal[key] = getattr(args, key)
    if args.scan_step_A is not None:
        cal["scan_step_A"] = args.scan_step_A[0] if len(args.scan_step_A) == 1 else tuple(
            args.scan_step_A)
    return cal


def run_fit(args: argparse.Namespace) -> dict[str, Any]:
    from .io import load
    from .session import Session

    ds = load(args.path, scan_shape=tuple(args.scan_shape) if args.scan_shape else None,
              **_calibration_kwargs(args))
    with Session(ds, device=args.device, calibration=args.calibration) as s:
        if args.calibration is None:
            s.fit(trials=args.trials, seed=args.seed, progress=not args.quiet)
        assert s.full_fit is not None
        doc: dict[str, Any] = {"dataset": repr(ds), "device": s.device,
                               "full_field": s.full_fit.to_dict()}
        rec = s.reconstruct()
        if args.region is not None:
            reg = s.fit_region(tuple(args.region), trials=args.trials, seed=args.seed,
                               progress=not args.quiet)
            doc["region"] = reg.fit.to_dict()
            rec = reg.crop
        doc["phase_sha256"] = rec.phase_hash()
        if args.png:
            _write_png(Path(args.png), rec.phase)
        if args.save_calibration:
            s.save_calibration(args.save_calibration)
    _write_json(args.json, doc)
    return doc


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="livessb", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="the widget on the embedded demo dataset (JupyterLab)")
    d.add_argument("--headless", action="store_true",
                   help="run the demo workflow without a browser; write PNGs + summary.json")
    d.add_argument("--out", type=Path, default=Path("demo-out"))
    d.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    d.add_argument("--trials", type=int, default=200)
    d.add_argument("--seed", type=int, default=42)
    d.add_argument("--port", type=int, default=None)
    d.add_argument("--no-browser", action="store_true")

    f = sub.add_parser("fit", help="fit a dataset file (.npy/.npz/.h5/.emd/.mib)")
    f.add_argument("path")
    f.add_argument("--json", required=True, help="write the fit record here")
    f.add_argument("--region", type=int, nargs=4, metavar=("R0", "R1", "C0", "C1"))
    f.add_argument("--png", help="write the phase (or the region's crop) as PNG")
    f.add_argument("--scan-shape", type=int, nargs=2, metavar=("ROWS", "COLS"))
    f.add_argument("--voltage-kV", dest="voltage_kV", type=float)
    f.add_argument("--semiangle-mrad", dest="semiangle_mrad", type=float)
    f.add_argument("--scan-step-A", dest="scan_step_A", type=float, nargs="+")
    f.add_argument("--detector-sampling-mrad", dest="detector_sampling_mrad", type=float)
    f.add_argument("--calibration", help="restore this calibration instead of fitting")
    f.add_argument("--save-calibration", help="save the calibration JSON here")
    f.add_argument("--trials", type=int, default=200)
    f.add_argument("--seed", type=int, default=42)
    f.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    f.add_argument("--quiet", action="store_true")

    b = sub.add_parser("benchmark", help="time the reference workload (SPEC §4)")
    b.add_argument("--json", required=True)
    b.add_argument("--scan", type=int, nargs=2, default=[512, 512])
    b.add_argument("--detector", type=int, nargs=2, default=[192, 192])
    b.add_argument("--dtype", default="uint16")
    b.add_argument("--runs", type=int, default=6)
    b.add_argument("--trials", type=int, default=200)
    b.add_argument("--seed", type=int, default=42)
    b.add_argument("--device", default="cuda", choices=["auto", "cpu", "cuda"])
    b.add_argument("--map", type=int, default=0, metavar="N",
                   help="also time a map of N×N tiles and its reconstruction (8 on 512²)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "demo":
            if args.headless:
                summary = run_demo_headless(args.out, args.device, args.trials, args.seed)
                print(json.dumps({k: summary[k] for k in ("full_field", "regions")}, indent=1,
                                 default=float))
                print(f"wrote {args.out}/summary.json and PNGs")
            else:
                from .demo_launch import launch_demo_notebook

                launch_demo_notebook(port=args.port, open_browser=not args.no_browser)
        elif args.command == "fit":
            run_fit(args)
            print(f"wrote {args.json}")
        else:
            from .bench.runner import run_benchmark

            run_benchmark(args.json, scan=tuple(args.scan), detector=tuple(args.detector),
                          dtype=args.dtype, runs=args.runs, trials=args.trials, seed=args.seed,
                          device=args.device, map_tiles=args.map)
            print(f"wrote {args.json}")
    except (ValueError, RuntimeError, OSError, MemoryError) as exc:
        print(f"livessb {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

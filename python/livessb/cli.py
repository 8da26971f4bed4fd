"""Command line: ``livessb demo | fit | map | series | benchmark``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from .cli_load import (
    add_data_arguments,
    check_data_args,
    load_dataset,
    open_session,
    write_json,
    write_png,
)
from .cli_map import add_map_parser, run_map
from .cli_text import cli_words, fit_lines, unknown_options_hint


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
        write_png(out / "full_phase.png", rec.phase)
        regions = {}
        for name, bounds in demo_regions(ds.scan_shape).items():
            reg = s.fit_region(bounds, trials=trials, seed=seed, region_id=name, progress=True)
            write_png(out / f"region_{name}.png", reg.phase)
            regions[name] = {"bounds": list(bounds), "params": reg.params, "loss": reg.fit.loss,
                             **_trust(reg.fit),
                             "truth_C10": truth.local_C10(bounds),
                             "C10_error_A": reg.params["C10"] - truth.local_C10(bounds),
                             "timings": reg.timings}
        s.save_calibration(out / "calibration.json")
        summary = {
            "dataset": repr(ds), "device": s.device, "trials": trials, "seed": seed,
            "truth": truth.to_dict(),
            "full_field": {"params": full.params, "loss": full.loss, **_trust(full),
                           "rotation_deg": full.rotation_deg, "transpose": full.transpose,
                           "rotation_error_deg": (full.rotation_deg - truth.rotation_deg + 180)
                           % 360 - 180, "timings": full.timings},
            "regions": regions, "upsample": rec.upsample, "phase_sha256": rec.phase_hash(),
            "total_s": time.perf_counter() - t0,
        }
    write_json(out / "summary.json", summary)
    return summary


def _trust(fit: Any) -> dict[str, Any]:
    """Errors, the names not determined, the model kept and the warnings of a fit."""
    choice = fit.provenance.get("model_choice") or {}
    return {"errors": fit.errors, "not_determined": fit.undetermined,
            "model": choice.get("kept"), "warnings": fit.provenance.get("warnings", [])}


def run_fit(args: argparse.Namespace) -> dict[str, Any]:
    from .regions import check_bounds

    say = (lambda *_a: None) if args.quiet else print
    ds, preprocessing = load_dataset(args, {"--json": args.json, "--png": args.png,
                                            "--save-calibration": args.save_calibration})
    region = None if args.region is None else check_bounds(tuple(args.region), ds.scan_shape)
    upsample: int | str = "auto" if args.upsample == "auto" else int(args.upsample)
    with open_session(args, ds, preprocessing, say) as s:
        assert s.full_fit is not None
        doc: dict[str, Any] = {"dataset": repr(ds), "device": s.device,
                               "preprocessing": s.preprocessing.to_dict(),
                               "full_field": s.full_fit.to_dict()}
        if args.calibration is not None:  # every region the file holds, as restored
            for rid, saved in s.regions.items():
                say("\n".join(fit_lines(f"region {rid} {tuple(saved.bounds)} (restored)",
                                        saved.fit)))
            doc["regions_restored"] = {rid: {"bounds": list(saved.bounds), **saved.fit.to_dict()}
                                       for rid, saved in s.regions.items()}
        rec = s.reconstruct(upsample=upsample)
        if region is not None:
            reg = s.fit_region(region, trials=args.trials, seed=args.seed,
                               progress=not args.quiet, object_model=args.object_model)
            say("\n".join(fit_lines(f"region {tuple(region)}", reg.fit)))
            doc["region"] = reg.fit.to_dict()
            rec = reg.crop if upsample == "auto" else s.reconstruct(
                reg.params, upsample=upsample, crop=region)
        doc["upsample"] = rec.upsample
        doc["phase_sha256"] = rec.phase_hash()
        written = []
        if args.png:
            written.append(str(write_png(Path(args.png), rec.phase)))
        if args.save_calibration:
            written.append(str(s.save_calibration(args.save_calibration)))
    if args.json:
        written.append(str(write_json(args.json, doc)))
    if written:
        say(f"wrote {', '.join(written)}")
    return doc


UNITS_EPILOG = """\
units: voltage in kV, semiangle in mrad, scan step in Å (1 Å = 100 pm = 0.1 nm),
detector sampling in mrad per pixel. Values outside plausible ranges (a unit typo,
e.g. a scan step of 60 "Å" that is 60 pm) are refused; --force accepts them.
Regions and --scan-region are scan pixels R0 R1 C0 C1 with exclusive stops (as Python
slices): rows R0..R1-1, columns C0..C1-1."""


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    fmt = argparse.ArgumentDefaultsHelpFormatter
    p = argparse.ArgumentParser(prog="livessb", description=__doc__)
    p.add_argument("--version", action="version", version=f"livessb {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="the widget on the embedded demo dataset (JupyterLab)",
                       formatter_class=fmt)
    d.add_argument("--headless", action="store_true",
                   help="run the demo workflow without a browser; write PNGs + summary.json")
    d.add_argument("--out", type=Path, default=Path("demo-out"),
                   help="folder for the headless demo's files (created)")
    d.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    d.add_argument("--trials", type=int, default=200, help="search trials per fit")
    d.add_argument("--seed", type=int, default=42)
    d.add_argument("--port", type=int, default=None, help="JupyterLab port (default: a free one)")
    d.add_argument("--no-browser", action="store_true")
    d.set_defaults(subparser=d)

    f = sub.add_parser("fit", help="fit a dataset file (.npy/.npz/.h5/.emd/.mib)",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Joint fit of defocus, astigmatism, tilt and depth on a "
                                   "4D-STEM file; prints a summary.", epilog=UNITS_EPILOG)
    f.add_argument("path", help="the 4D-STEM file")
    f.add_argument("--json", metavar="FILE", help="also write the full fit record (JSON) here")
    f.add_argument("--region", type=int, nargs=4, metavar=("R0", "R1", "C0", "C1"),
                   help="also fit this region (scan pixels, stops exclusive)")
    f.add_argument("--png", metavar="FILE", help="write the phase (or the region's crop) as PNG")
    add_data_arguments(f)
    f.add_argument("--fit-detector-sampling", action="store_true",
                   help="fit the detector sampling jointly (an outer refinement, slower; "
                        "docs/uncertainty.md)")
    f.set_defaults(subparser=f)
    add_map_parser(sub)

    b = sub.add_parser("benchmark", help="time the reference workload (SPEC §4)",
                       formatter_class=fmt)
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
    b.set_defaults(subparser=b)
    from .series.cli import add_series_parser

    add_series_parser(sub)
    return p


def _check_args(args: argparse.Namespace) -> None:
    if args.command in ("fit", "map"):
        check_data_args(args)


def _show_warning(message: Warning | str, category: type[Warning], *_rest: Any,
                  **_kw: Any) -> None:
    print(f"livessb: warning: {cli_words(str(message))}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args, extras = build_parser().parse_known_args(argv)
    if extras:  # the subcommand's own usage, and the flag a typo most likely meant
        args.subparser.error(f"unrecognized arguments: "
                             f"{unknown_options_hint(args.subparser, extras)}")
    old_show = warnings.showwarning
    warnings.showwarning = _show_warning
    try:
        _check_args(args)
        if args.command == "demo":
            if args.headless:
                summary = run_demo_headless(args.out, args.device, args.trials, args.seed)
                print(json.dumps({k: summary[k] for k in ("full_field", "regions")}, indent=1,
                                 default=float))
                print(f"wrote {args.out}/summary.json and PNGs")
            else:
                from .demo_launch import launch_demo_notebook

                launch_demo_notebook(port=args.port, open_browser=not args.no_browser)
        elif args.command == "series":
            from .series.cli import run_series_cli

            return run_series_cli(args)
        elif args.command == "fit":
            from .progress import progress_enabled

            with progress_enabled(not args.quiet):  # every stage's bar, reconstruct's too
                run_fit(args)
        elif args.command == "map":
            from .progress import progress_enabled

            with progress_enabled(not args.quiet):
                run_map(args)
        else:
            from .bench.runner import run_benchmark

            run_benchmark(args.json, scan=tuple(args.scan), detector=tuple(args.detector),
                          dtype=args.dtype, runs=args.runs, trials=args.trials, seed=args.seed,
                          device=args.device, map_tiles=args.map)
            print(f"wrote {args.json}")
    except KeyboardInterrupt:
        print(f"livessb {args.command}: interrupted", file=sys.stderr)
        return 130
    except (ValueError, RuntimeError, OSError, MemoryError) as exc:
        text = cli_words(str(exc)) if args.command in ("fit", "map") else str(exc)
        if isinstance(exc, MemoryError) and not text:
            text = "out of memory: try --bin-detector 2, --crop-to-bf or --scan-region"
        print(f"livessb {args.command}: error: {text}", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug: say so plainly, the traceback on request
        if os.environ.get("LIVESSB_DEBUG"):
            raise
        print(f"livessb {args.command}: internal error: {type(exc).__name__}: {exc} "
              "(please report it; LIVESSB_DEBUG=1 shows the traceback)", file=sys.stderr)
        return 3
    finally:
        warnings.showwarning = old_show
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

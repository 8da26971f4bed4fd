"""``livessb series PATH... --out DIR``: the command-line face of ``fit_series``."""

from __future__ import annotations

import argparse
import math
from typing import Any

from ..cli_load import add_calibration_arguments, calibration_kwargs
from ..cli_text import UsageError

EPILOG = """\
Each scan's reconstruction (EMD) and JSON record land in DIR/scans/ as it finishes;
DIR/series.json summarises. Rerun with the same --out to fit only what is missing.
Without --scheduler a cluster is started here (one worker per GPU, or CPU processes).
Calibration values missing from the files: --voltage-kV, --semiangle-mrad, --scan-step-A.
Exit status: 0 every scan done, 1 some scans failed or were skipped, 2 bad input."""


def add_series_parser(sub: Any) -> argparse.ArgumentParser:
    s = sub.add_parser("series", help="fit a series of scans on a Dask cluster (docs/series.md)",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Fit a series of 4D-STEM scans of one geometry, each "
                                   "warm-started from a reference scan's calibration.",
                       epilog=EPILOG)
    s.add_argument("paths", nargs="+", metavar="PATH", help="the scans, in series order")
    s.add_argument("--out", required=True, metavar="DIR", help="folder for every result")
    s.add_argument("--scheduler", metavar="ADDRESS",
                   help="join this Dask scheduler (e.g. tcp://host:8786) instead of "
                        "starting a cluster here")
    s.add_argument("--workers", type=int, metavar="N",
                   help="workers of the cluster started here (default: one per GPU, "
                        "else one CPU process per 4 cores)")
    s.add_argument("--reference", metavar="PATH|INDEX",
                   help="the scan the others start from (default: the first)")
    s.add_argument("--fix", metavar="C12,phi12",
                   help="parameters held at the reference's fitted values in every other "
                        "scan (comma-separated names)")
    s.add_argument("--warm-start", choices=["reference", "previous", "off"],
                   default="reference",
                   help="start each scan from the reference's fit, the previous scan's "
                        "(one at a time), or fit each from scratch")
    s.add_argument("--average", action="store_true",
                   help="also write the drift-corrected average (DIR/average.emd)")
    s.add_argument("--trials", type=int, default=200, metavar="N",
                   help="search trials of the reference's (and cold) fits")
    s.add_argument("--seed", type=int, default=42, metavar="N")
    s.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    add_calibration_arguments(s)
    s.add_argument("--quiet", action="store_true", help="no progress bar, only the summary")
    s.set_defaults(subparser=s)
    return s


def run_series_cli(args: argparse.Namespace) -> int:
    from .api import fit_series

    if args.trials < 1:
        raise UsageError(f"--trials must be at least 1, got {args.trials}")
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    if args.scheduler is not None and args.workers is not None:
        raise UsageError("--workers sizes a cluster started here: with --scheduler the "
                         "cluster's own workers are used; drop one of the two")
    load_options = calibration_kwargs(args)
    modes: dict[str, bool | str] = {"reference": True, "previous": "previous", "off": False}
    warm = modes[args.warm_start]
    result = fit_series(args.paths, reference=args.reference, fixed=args.fix,
                        warm_start=warm, out=args.out, average=args.average,
                        trials=args.trials, seed=args.seed, device=args.device,
                        scheduler=args.scheduler, workers=args.workers,
                        progress=not args.quiet, load_options=load_options)
    for line in summary_lines(result):
        print(line)
    return 0 if not result.failed else 1


def summary_lines(result: Any) -> list[str]:
    lines = [f"series: {len(result.done)} of {len(result.records)} scans done "
             f"({len(result.kept)} kept from an earlier run), reference scan "
             f"{result.reference}; {result.cluster}"]
    for r in result.records:
        if r.get("status") == "done":
            c10, err = r["params"]["C10"], r["errors"].get("C10", math.nan)
            lines.append(f"  {r['index']:>4}  {r['label']}: C10 {c10:.2f} ± {err:.2f} Å "
                         f"({r['mode']}, {r['timings'].get('total_s', math.nan):.2f} s)")
        else:
            lines.append(f"  {r['index']:>4}  {r.get('label', r.get('source'))}: "
                         f"{r['status']}: {r.get('error')}")
    if result.average is not None:
        a = result.average
        if a.get("status") == "done":
            lines.append(f"average of {a['n']} scans: SNR gain {a['snr_gain']:.2f} "
                         f"(ideal √N = {a['snr_gain_ideal']:.2f}) -> {a['file']}")
        else:
            lines.append(f"average: {a.get('status')}: {a.get('error', '')}")
    lines.append(f"wrote {result.out}")
    return lines

"""``livessb map``: the joint fit on every tile of a grid (``Session.fit_map``) from the
command line, with a summary per parameter, the map as JSON, its reconstruction (each
place corrected with its local fit) as PNG, and the calibration (maps included)."""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .cli_load import add_data_arguments, load_dataset, open_session, write_json, write_png
from .cli_text import UsageError
from .params import BY_NAME

if TYPE_CHECKING:
    from .maps import MapResult

EPILOG = """\
example: livessb map scan.npy --voltage-kV 200 --semiangle-mrad 20 --scan-step-A 0.6 \\
             --tile 32 32 --json map.json --png map.png
The full field is fitted first (its rotation is held for every tile), or restored with
--calibration. Tiles and steps are scan positions (rows, cols); the last row and column
of tiles end on the scan edge. Units as for livessb fit (livessb fit --help)."""


def add_map_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``map`` subcommand on the command line's subparsers."""
    m: argparse.ArgumentParser = sub.add_parser(
        "map", help="fit a grid of tiles: aberration, tilt and depth maps",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description="The joint fit of defocus, astigmatism, tilt and depth on every tile of "
                    "a grid over the scan (docs/maps.md); prints each parameter's range.")
    m.add_argument("path", help="the 4D-STEM file")
    m.add_argument("--tile", type=int, nargs=2, metavar=("R", "C"),
                   help="tile size in scan positions (rows, cols); required")
    m.add_argument("--step", type=int, nargs=2, metavar=("R", "C"),
                   help="tile step (default: the tile, adjacent tiles; smaller: overlapping)")
    m.add_argument("--json", metavar="FILE", help="write the map (arrays per parameter and "
                                                  "every tile's fit) here; required")
    m.add_argument("--png", metavar="FILE",
                   help="write the map's reconstruction (each place with its local fit) as PNG")
    add_data_arguments(m)
    m.set_defaults(subparser=m)
    return m


def _listed(a: np.ndarray) -> list[Any]:
    """A float array as nested lists, None where not finite (JSON has no NaN)."""
    return [_listed(row) for row in a] if a.ndim > 1 else [
        float(v) if math.isfinite(v) else None for v in a.tolist()]


def _finite(x: Any) -> Any:
    """``x`` with every non-finite float replaced by None (a record written after minutes
    of fitting must not fail on one NaN error)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    return x


def map_record(m: MapResult) -> dict[str, Any]:
    """The map for --json: the grid, per parameter (tile rows × cols) values, 1-σ errors
    and flags, and the full record (``MapResult.to_dict``) a calibration also holds."""
    return _finite({
        "grid_shape": list(m.shape), "tile": list(m.tile), "step": list(m.step),
        "bounds": m.bounds.tolist(), "centers_px": m.centers_px.tolist(),
        "losses": _listed(m.losses),
        "params": {n: _listed(v) for n, v in m.params.items()},
        "errors": {n: _listed(v) for n, v in m.errors.items()},
        "undetermined": {n: v.tolist() for n, v in m.undetermined.items()},
        "on_box_edge": {n: v.tolist() for n, v in m.on_box_edge.items()},
        "units": {n: BY_NAME[n].unit for n in m.params if n in BY_NAME},
        "record": m.to_dict()})


def summary_lines(m: MapResult, elapsed_s: float) -> list[str]:
    """The grid, then per parameter its range over the tiles, the median 1-σ error and the
    tiles where it is not determined or on the box edge."""
    rows, cols = m.shape
    n = rows * cols
    lines = [f"map: {rows}×{cols} tiles of {m.tile[0]}×{m.tile[1]} positions (step "
             f"{m.step[0]}×{m.step[1]}), {elapsed_s:.1f} s"]
    width = max(len(k) for k in m.params)
    for name, values in m.params.items():
        p = BY_NAME.get(name)
        unit, digits = (p.unit, max(p.digits, 2)) if p is not None else ("", 3)
        errs = m.errors[name][np.isfinite(m.errors[name])]
        err = f", median error {np.median(errs):.{digits}f} {unit}".rstrip() if errs.size else ""
        text = f"  {name:<{width}}  {values.min():.{digits}f} … {values.max():.{digits}f} {unit}"
        text += err
        counts = (("not determined", int(m.undetermined[name].sum())),
                  ("on the box edge", int(m.on_box_edge[name].sum())))
        flags = [f"{what} in {k}/{n} tiles" for what, k in counts if k]
        lines.append(text + (f" ({', '.join(flags)})" if flags else ""))
    check = m.provenance.get("window_check")  # the tiles of a "hann" or "auto" session
    if isinstance(check, dict):
        text = (f"  window check: leakage in {check['leakage']}/{check['checked']} tiles, "
                f"'none' suits {check['recommended_none']}")
        if check["reported_none"]:
            text += " (their unapodised fits are reported: scan_window='auto')"
        elif check["recommended_none"]:
            text += " (scan_window='auto' would report their unapodised fits)"
        lines.append(text)
    return lines


def run_map(args: argparse.Namespace) -> dict[str, Any]:
    from .fit.maps import tile_grid

    say = (lambda *_a: None) if args.quiet else print
    if args.tile is None:  # not argparse's required=: a typo'd --tiles gets its hint first
        raise UsageError("--tile R C is required: the tile size in scan positions, "
                         "e.g. --tile 32 32")
    tile = (args.tile[0], args.tile[1])
    step = None if args.step is None else (args.step[0], args.step[1])
    if args.json is None:
        raise UsageError("--json FILE is required: where the map is written")
    ds, preprocessing = load_dataset(args, {"--json": args.json, "--png": args.png,
                                            "--save-calibration": args.save_calibration})
    tile_grid(ds.scan_shape, tile, step)  # a grid that cannot work, before any fitting
    upsample: int | str = "auto" if args.upsample == "auto" else int(args.upsample)
    with open_session(args, ds, preprocessing, say) as s:
        assert s.full_fit is not None
        t0 = time.perf_counter()
        m = s.fit_map(tile=tile, step=step, trials=args.trials, seed=args.seed,
                      progress=not args.quiet)
        say("\n".join(summary_lines(m, time.perf_counter() - t0)))
        doc = {"dataset": repr(ds), "device": s.device,
               "preprocessing": s.preprocessing.to_dict(),
               "full_field": _finite(s.full_fit.to_dict()), "map": map_record(m)}
        written = [str(write_json(args.json, doc))]  # first: the fits are safe on disk
        if args.png:
            written.append(str(write_png(Path(args.png), m.reconstruct(upsample=upsample).phase)))
        if args.save_calibration:
            written.append(str(s.save_calibration(args.save_calibration)))
    say(f"wrote {', '.join(written)}")
    return doc

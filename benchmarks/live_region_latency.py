"""Live regions, server side: while a region is dragged, how often does a finished fit arrive?

Measured (not a test) through the widget's own edit path: ``SSBWidget.regions`` is set
as the front end sets it during a drag with live regions on (one edit per display
frame, ``--edit-hz``), moving a ``--size``² region one scan pixel per edit (down, and
back up at the scan's edge) for ``--seconds``. Every finished regional fit (joint fit,
full-scan reconstruction, crop PNG) reaches ``send`` as a ``crop`` message; the record
holds the times between them during the drag (the issue's target on one H200: at most
0.1 s), crops painted per second, how stale each was (its ``behind``: edits between it
and the latest when it was sent; median and max) and the time from the last edit to
the final crop (the fit of the place where the drag ends).

    python benchmarks/live_region_latency.py [--device cuda|cpu] [--json OUT]
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(REPO / "benchmarks"))

from preview_latency import _commit, _cpu_session, _gpu_session, write_record  # noqa: E402

import livessb  # noqa: E402


def drag(session: Any, size: int, seconds: float, edit_hz: float) -> dict[str, Any]:
    w = livessb.SSBWidget(session, fit=False, live_regions=True)
    w.wait()
    arrivals: list[tuple[float, int, int]] = []  # (time, generation, behind)
    lock = threading.Lock()
    send = w.send

    def on_send(content: dict[str, Any], buffers: list[bytes] | None = None) -> None:
        if content.get("type") == "crop":
            with lock:
                arrivals.append((time.perf_counter(), int(content["generation"]),
                                 int(content.get("behind", 0))))
        send(content, buffers)

    w.send = on_send
    rows, cols = session.dataset.scan_shape
    r0, c0 = (rows - size) // 2 - int(seconds * edit_hz) // 2, (cols - size) // 2
    r0 = max(r0, 0)
    span = max(1, rows - size - r0)  # rows the region can move down
    try:
        w.regions = [{"id": "r1", "row_start": r0, "row_stop": r0 + size,
                      "col_start": c0, "col_stop": c0 + size}]
        w.wait(600)  # the first fit of this size (plans, kernels) is not part of the drag
        with lock:
            arrivals.clear()
        edits = 0
        t_start = t_last_edit = time.perf_counter()
        while time.perf_counter() - t_start < seconds:
            edits += 1
            # back and forth over the rows left free: every edit moves the region
            r = r0 + (edits % (2 * span) if edits % (2 * span) <= span
                      else 2 * span - edits % (2 * span))
            w.regions = [{"id": "r1", "row_start": r, "row_stop": r + size,
                          "col_start": c0, "col_stop": c0 + size}]
            t_last_edit = time.perf_counter()
            time.sleep(max(0.0, t_start + edits / edit_hz - time.perf_counter()))
        t_end = time.perf_counter()
        final_generation = w._scheduler.generation("r1")
        w.wait(600)
        with lock:
            during = [a for a in arrivals if a[0] <= t_end]
            final = [t for t, g, _ in arrivals if g == final_generation]
    finally:
        w.close()
    times = [t_start] + [t for t, _, _ in during]
    gaps = np.diff(times) if len(times) > 1 else np.array([seconds])
    behind = [b for _, _, b in during]
    return {"edits": edits, "edit_hz": edit_hz, "seconds": t_end - t_start,
            "fits_arrived_during_drag": len(during),
            "gap_s": {"max": float(gaps.max()), "median": float(np.median(gaps)),
                      "p90": float(np.percentile(gaps, 90))},
            "gaps_s": [float(g) for g in gaps],
            "crops_painted_per_s": len(during) / (t_end - t_start),
            "behind": {"median": float(np.median(behind)) if behind else None,
                       "max": max(behind) if behind else None},
            "behind_arrived": behind,
            # the fit of the place where the drag ends: from its edit to its crop sent
            "last_edit_to_final_crop_s": final[-1] - t_last_edit if final else None,
            "generations_arrived": [g for _, g, _ in during]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    ap.add_argument("--size", type=int, default=128, help="region side (scan px)")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--edit-hz", type=float, default=60.0)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    out = args.json or (REPO / "benchmarks" / "results" /
                        f"live-region-{args.device}-{dt.date.today().isoformat()}.json")
    session, device = (_gpu_session(args.seed) if args.device == "cuda"
                       else _cpu_session(args.trials, args.seed))
    size = args.size if args.device == "cuda" else min(args.size, 32)
    try:
        result = {"what": "live region drag: time between finished regional fits (crop sent) "
                          "while the region moves one scan px per edit",
                  "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                  "commit": _commit(), "device": device, "engine": session.device,
                  "region_px": size, "target_gap_s": 0.1,
                  **drag(session, size, args.seconds, args.edit_hz)}
    finally:
        session.close()
    write_record(out, result)
    g, b, tail = result["gap_s"], result["behind"], result["last_edit_to_final_crop_s"]
    print(f"{device}: {result['fits_arrived_during_drag']} crops in {result['seconds']:.2f} s "
          f"({result['crops_painted_per_s']:.1f}/s), gap max {g['max']:.3f} s, median "
          f"{statistics.median(result['gaps_s']):.3f} s, behind median {b['median']} max "
          f"{b['max']}, last edit -> final crop "
          f"{'never' if tail is None else f'{tail:.3f} s'} -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

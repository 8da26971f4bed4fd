"""Live-steering latency, server side: a parameter change → the frame's bytes handed to send.

Measured (not a test) through the widget's own message path: a ``preview``
message goes into ``SSBWidget``'s comm handler, the worker renders the frame
(full field at display resolution, VP loss, uint16 quantisation) and the time
runs until its bytes reach ``send``. A slider sweep of ``--steps`` C10 values
around the fitted one, one request at a time (latency, not throughput); the first
frame is cold, the rest warm: first, warm median and p90. A breakdown times the
frame's parts (reconstruction, loss, quantisation) directly over the same sweep.

* CPU (default): the demo dataset (``livessb.simulate.demo_dataset``), geometry
  from a full-field fit of ``--trials`` trials.
* ``--device cuda``: the SPEC §4 workload, 512² scan × 192² detector uint16
  generated on the device (``livessb.bench``), geometry from a short fit.

    python benchmarks/preview_latency.py [--device cpu|cuda] [--steps 100] [--json OUT]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

import livessb  # noqa: E402
from livessb.bench.report import git_commit  # noqa: E402
from livessb.params import JOINT, to_vector  # noqa: E402
from livessb.preview import display_upsample, render_preview  # noqa: E402

SWEEP_A = 50.0  # C10 from fit - 50 Å to fit + 50 Å


def _commit() -> str:
    # LIVESSB_COMMIT first: a copied tree (the GPU machine) has no usable .git
    return git_commit() or "unknown"


def write_record(out: Path, result: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


def _summary(values_s: list[float]) -> dict[str, Any]:
    warm = values_s[1:] or values_s
    ms = [1e3 * v for v in warm]
    return {"n": len(values_s), "first_ms": 1e3 * values_s[0],
            "warm_median_ms": statistics.median(ms), "warm_p90_ms": float(np.percentile(ms, 90)),
            "warm_min_ms": min(ms), "warm_max_ms": max(ms)}


def _gpu_session(seed: int) -> tuple[Any, str]:
    """The SPEC §4 512² workload on the device, geometry from a short fit."""
    import cupy as cp

    from livessb.bench.timing import full_field_session

    session, _fit = full_field_session(512, seed=seed)
    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    return session, name


def _cpu_session(trials: int, seed: int) -> tuple[Any, str]:
    session = livessb.Session(livessb.simulate.demo_dataset(), device="cpu")
    session.fit(trials=trials, seed=seed, progress=False)
    return session, f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def sweep(session: Any, steps: int) -> list[dict[str, float]]:
    fitted = dict(session.full_fit.params)
    return [{**fitted, "C10": fitted["C10"] + v}
            for v in np.linspace(-SWEEP_A, SWEEP_A, steps)]


def widget_latency(session: Any, params: list[dict[str, float]], draft: bool = False,
                   ) -> tuple[list[float], list[float]]:
    """Seconds from the preview message to the frame bytes in ``send``, per step, and the
    process CPU seconds over the same span (all threads: the worker's and Numba's; on a
    shared, loaded machine the wall time includes waiting for a core)."""
    w = livessb.SSBWidget(session, fit=False)
    w.wait()
    arrived = threading.Event()
    t_sent: list[float] = []
    nbytes: list[int] = []

    def send(content: dict[str, Any], buffers: list[bytes] | None = None) -> None:
        if content.get("type") == "frame" and content["seq"] > 0:
            t_sent.append(time.perf_counter())
            nbytes.append(len(buffers[0]) if buffers else 0)
            arrived.set()

    w.send = send
    out, cpu = [], []
    try:
        for seq, p in enumerate(params, start=1):
            arrived.clear()
            c0 = time.process_time()
            t0 = time.perf_counter()
            w._on_custom_msg(w, {"type": "preview", "seq": seq, "params": p, "view": "phase",
                                 "draft": draft}, [])
            if not arrived.wait(120):
                raise RuntimeError(f"no frame for request {seq}: {w.message}")
            out.append(t_sent[-1] - t0)
            cpu.append(time.process_time() - c0)
    finally:
        w.close()
    return out, cpu


def breakdown(session: Any, params: list[dict[str, float]], max_px: int) -> dict[str, Any]:
    """The frame's parts timed directly (the same sweep, after the widget's); ``*_cpu``:
    process CPU time (all threads), a bound on the wall time of an idle machine."""
    f = display_upsample(session.dataset.scan_shape, session.upsample_factor, max_px)
    evaluate = session.loss_evaluator()
    parts: dict[str, list[float]] = {"reconstruct": [], "loss": [], "quantise": [], "total": [],
                                     "reconstruct_cpu": [], "loss_cpu": []}
    for p in params:
        t0, c0 = time.perf_counter(), time.process_time()
        session.reconstruct(p, upsample=f)
        t1, c1 = time.perf_counter(), time.process_time()
        evaluate(to_vector(p, JOINT, default=0.0)[None])
        t2, c2 = time.perf_counter(), time.process_time()
        parts["reconstruct_cpu"].append(c1 - c0)
        parts["loss_cpu"].append(c2 - c1)
        frame = render_preview(session, p, max_px=max_px, loss=0.0)
        t3 = time.perf_counter()
        frame.message(1)
        t4 = time.perf_counter()
        parts["reconstruct"].append(t1 - t0)
        parts["loss"].append(t2 - t1)
        parts["quantise"].append(t4 - t3)
        parts["total"].append((t1 - t0) + (t2 - t1) + (t4 - t3))
    return {"display_upsample": f, "frame_shape": list(frame.shape),
            **{k: _summary(v) for k, v in parts.items()}}


def rotation_preview(session: Any, params: dict[str, float]) -> dict[str, Any]:
    """A preview at a new rotation (geometry rebuilt), again at that rotation (cached), then
    at the fitted one (cached): wall and process CPU seconds of each."""
    fitted = float(session.rotation_deg)
    out: dict[str, Any] = {}
    for name, rot in (("new_rotation", fitted + 1.0), ("same_rotation_again", fitted + 1.0),
                      ("back_to_fitted", fitted)):
        t0, c0 = time.perf_counter(), time.process_time()
        render_preview(session, params, rotation_deg=rot).message(1)
        out[name] = {"wall_ms": 1e3 * (time.perf_counter() - t0),
                     "cpu_ms": 1e3 * (time.process_time() - c0)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--trials", type=int, default=200, help="CPU fit trials (geometry only)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    today = dt.date.today().isoformat()
    out = args.json or (REPO / "benchmarks" / "results"
                        / f"preview-latency-{args.device}-{today}.json")
    t0 = time.perf_counter()
    session, device = (_gpu_session(args.seed) if args.device == "cuda"
                       else _cpu_session(args.trials, args.seed))
    setup_s = time.perf_counter() - t0
    try:
        params = sweep(session, args.steps)
        load_before = os.getloadavg()
        latency, latency_cpu = widget_latency(session, params)
        # What a slider drag gets since the draft frames: no upsampling until the release.
        drag, drag_cpu = widget_latency(session, params, draft=True)
        parts = breakdown(session, params, livessb.SSBWidget.max_frame_px)
        load_after = os.getloadavg()
        result = {
            "what": "server-side preview latency: preview message -> frame bytes handed to "
                    "send (SSBWidget, one request at a time)",
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "commit": _commit(), "device": device, "engine": session.device,
            "host": {"cpus": os.cpu_count(), "loadavg_before": list(load_before),
                     "loadavg_after": list(load_after), "python": platform.python_version()},
            "workload": {"dataset": "demo_dataset" if args.device == "cpu" else
                         "synthetic_gpu 512x512 scan, 192x192 detector, uint16",
                         "scan_shape": list(session.dataset.scan_shape),
                         "detector_shape": list(session.dataset.detector_shape),
                         "auto_upsample": int(session.upsample_factor),
                         "steps": args.steps, "sweep": f"C10 = fit ± {SWEEP_A} Å",
                         "setup_s": setup_s},
            "targets_ms": {"cpu_demo": 120, "cuda_h200_512": 20, "cuda_h200_512_drag": 16},
            "latency": _summary(latency), "latency_all_ms": [1e3 * v for v in latency],
            "latency_cpu": _summary(latency_cpu),
            "drag_draft_latency": _summary(drag), "drag_draft_latency_cpu": _summary(drag_cpu),
            "rotation_preview": rotation_preview(session, params[0]),
            "breakdown": parts,
        }
    finally:
        session.close()
    write_record(out, result)
    lat, cpu = result["latency"], result["latency_cpu"]
    print(f"{device}: first {lat['first_ms']:.1f} ms, warm median {lat['warm_median_ms']:.1f} ms,"
          f" p90 {lat['warm_p90_ms']:.1f} ms (CPU {cpu['warm_median_ms']:.1f} ms) over "
          f"{args.steps} steps, load {load_before[0]:.1f}; drag (draft) frames warm median "
          f"{result['drag_draft_latency']['warm_median_ms']:.1f} ms -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

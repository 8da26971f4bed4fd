"""``livessb benchmark``: the SPEC §4 reference workload, run through the public Session API.

1. Parity first (CUDA): a small simulated dataset through the CPU and CUDA engines
   (losses, derivatives, reconstruction) and the same seed twice on the device.
2. A device-generated ``scan × detector`` dataset (default 512² × 192² uint16,
   ≈8.8k BF pixels; ``livessb.bench.device_data``).
3. ``runs`` runs in one process (first + warm), each through the public Session API:
   open, full-field fit (both rotation branches), Auto reconstruction, regions
   256², 128², moved 128², resized 127×128, close. First, warm median and p90.
   With ``map_tiles=N`` (``--map N``) each run also fits a map of N×N tiles and
   reconstructs it (``livessb.bench.map_workload``; 8 on 512²: tiles of 64²).
4. Per-candidate evaluation time on the full field and its floor (bytes of spectra
   read / measured copy bandwidth; flops / measured fp32 FMA peak), memory figures.

``--device cpu`` runs steps 2–3 on the CPU engine with the host simulator (no parity,
ceilings or candidate timing): a small end-to-end check of the runner itself.

``python -m livessb.bench --json OUT [--scan R C] [--detector R C] [--dtype uint16]``
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import time
from pathlib import Path
from typing import Any

from .. import __version__
from .backend import backend_for
from .report import delta, git_commit, newton_trace, print_table, stats, versions, write_json
from .workload import REFERENCE_S, TARGETS_S, scaled_regions


def run_benchmark(
    json_path: str | Path | None,
    scan: tuple[int, int] = (512, 512),
    detector: tuple[int, int] = (192, 192),
    dtype: str = "uint16",
    runs: int = 6,
    trials: int = 200,
    seed: int = 42,
    device: str = "cuda",
    parity: bool = True,
    map_tiles: int = 0,
) -> dict[str, Any]:
    from ..atomic import folder_of, require_folder
    from ..session import Session

    if json_path is not None:  # before minutes of benchmarking (none is created)
        require_folder(folder_of(json_path), f"--json {json_path}")
    backend = backend_for(device)
    on_gpu = device != "cpu"
    result: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "commit": git_commit(), "versions": versions(__version__),
        "device": backend.device_name,
        "workload": {"scan": list(scan), "detector": list(detector), "dtype": dtype,
                     "runs": runs, "trials": trials, "seed": seed, "engine": device,
                     **({"map_tiles": map_tiles} if map_tiles else {})},
        "targets_s": TARGETS_S, "reference_rtx_pro_6000_s": REFERENCE_S,
    }
    if parity and on_gpu:
        from .parity import parity_check

        t0 = time.perf_counter()
        result["parity"] = parity_check(device)
        result["parity"]["time_s"] = time.perf_counter() - t0
        print("parity:", {k: v for k, v in result["parity"].items() if k != "truth"}, flush=True)
    if on_gpu:
        from .timing import measure_ceilings

        result["ceilings"] = measure_ceilings()
        print("ceilings:", result["ceilings"], flush=True)
    ds, truth = backend.generate(scan, detector, dtype, seed)
    result["dataset"] = {**truth.to_dict(), "n_bf": None, "counts_bytes": ds.counts.nbytes}
    print(f"dataset generated in {truth.generate_s:.2f} s", flush=True)
    regions = scaled_regions(scan)
    result["regions"] = {k: list(v) for k, v in regions.items()}
    times: dict[str, list[float]] = {k: [] for k in
                                     ("open", "fit_full_both_branches", "reconstruct_auto",
                                      *regions, "close")}
    if map_tiles:
        from .map_workload import MAP_OPERATIONS, run_map

        times.update({k: [] for k in MAP_OPERATIONS})
    stages: list[dict[str, Any]] = []
    memory: list[dict[str, Any]] = []
    fits: list[dict[str, Any]] = []
    hashes: list[str] = []
    for run in range(runs):
        backend.free_pool()
        before = backend.pool_figures()
        t0 = time.perf_counter()
        s = Session(ds, device=device)
        times["open"].append(time.perf_counter() - t0)
        diag = s.diagnostics  # holds the engine: its close breakdown is read after close
        result["dataset"]["n_bf"] = diag.n_bf
        result["preprocessing"] = {"active": s.preprocessing.active,
                                   **s.preprocessing.to_dict()}
        snap = diag.stats
        t0 = time.perf_counter()
        full = s.fit(trials=trials, seed=seed, progress=False)
        times["fit_full_both_branches"].append(time.perf_counter() - t0)
        engine_full = delta(snap, diag.stats)
        mem_prep = s.memory_info()
        snap = diag.stats
        t0 = time.perf_counter()
        rec = s.reconstruct()
        times["reconstruct_auto"].append(time.perf_counter() - t0)
        engine_rec = delta(snap, diag.stats)
        hashes.append(rec.phase_hash())
        st: dict[str, Any] = {"fit_full": full.timings, "fit_full_engine": engine_full,
                              "reconstruct_engine": engine_rec,
                              "fit_full_newton_steps": len(full.newton),
                              "fit_full_newton_trace": newton_trace(full.newton)}
        reg_fits = {}
        for name, bounds in regions.items():
            snap = diag.stats
            t0 = time.perf_counter()
            reg = s.fit_region(bounds, trials=trials, seed=seed)
            times[name].append(time.perf_counter() - t0)
            st[name] = {**reg.timings, "newton_steps": len(reg.fit.newton),
                        "newton_trace": newton_trace(reg.fit.newton),
                        "engine": delta(snap, diag.stats)}
            reg_fits[name] = {"params": reg.params, "loss": reg.fit.loss,
                              "truth_C10": truth.local_C10(bounds)}
        fit_record: dict[str, Any] = {"full": {"params": full.params, "loss": full.loss,
                                               "rotation_deg": full.rotation_deg},
                                      "regions": reg_fits}
        if map_tiles:
            map_times, map_stages, fit_record["map"] = run_map(
                s, diag, scan, map_tiles, trials, seed, truth)
            for k, v in map_times.items():
                times[k].append(v)
            st.update(map_stages)
        mem_before_close = s.memory_info()
        evals = s.evaluations
        if run == 0:  # after the run's own figures, so they cover the workload only
            if on_gpu:
                from .timing import candidate_timing

                result["candidate_timing"] = candidate_timing(s, result["ceilings"], trials)
                print("candidate timing:", result["candidate_timing"], flush=True)
            # For comparison: the same fit with branch θ+π searched too (not mirrored).
            snap = diag.stats
            t0 = time.perf_counter()
            both = s.fit(trials=trials, seed=seed, progress=False, search_both_branches=True)
            result["fit_full_both_branches_searched"] = {
                "time_s": time.perf_counter() - t0, "timings": both.timings,
                "engine": delta(snap, diag.stats), "params": both.params, "loss": both.loss,
                "rotation_deg": both.rotation_deg, "branches": both.branches}
            print("both branches searched:", result["fit_full_both_branches_searched"]["time_s"],
                  flush=True)
        t0 = time.perf_counter()
        s.close()
        times["close"].append(time.perf_counter() - t0)
        after = backend.pool_figures()
        memory.append({"close_breakdown": diag.close_breakdown,
                       "pool_before_session": before, "after_full_fit": mem_prep,
                       "before_close": mem_before_close, "pool_after_close": after,
                       "pool_back_to_baseline": after["used_bytes"] <= before["used_bytes"]
                       and after["total_bytes"] <= before["total_bytes"]})
        stages.append({**st, "evaluations": evals})
        fits.append(fit_record)
        print(f"run {run}: " + ", ".join(f"{k}={v[-1]:.4f}" for k, v in times.items()),
              flush=True)
    result["times_s"] = {k: stats(v) for k, v in times.items()}
    targets = dict(TARGETS_S)
    if map_tiles:
        from .map_workload import MAP_TARGETS_S

        targets.update(MAP_TARGETS_S)
    result["vs_target"] = {k: {"warm_median_s": result["times_s"][k]["warm_median"],
                               "target_s": t, "met": result["times_s"][k]["warm_median"] <= t}
                           for k, t in targets.items()}
    result["stages"] = stages
    result["memory"] = memory
    result["fits"] = fits
    result["truth"] = truth.params
    result["reconstruction_hashes_identical"] = len(set(hashes)) == 1
    result["fits_identical_across_runs"] = all(json.dumps(f, sort_keys=True) == json.dumps(
        fits[0], sort_keys=True) for f in fits)
    if json_path is not None:
        write_json(result, json_path)
    return result


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="livessb benchmark",
                                description=(__doc__ or "").split("\n")[0])
    p.add_argument("--json", required=True, help="where to write the results JSON")
    p.add_argument("--scan", nargs=2, type=int, default=(512, 512))
    p.add_argument("--detector", nargs=2, type=int, default=(192, 192))
    p.add_argument("--dtype", default="uint16", choices=["uint8", "uint16", "uint32", "float32"])
    p.add_argument("--runs", type=int, default=6)
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--device", default="cuda")
    p.add_argument("--no-parity", action="store_true")
    p.add_argument("--map", type=int, default=0, metavar="N",
                   help="also time a map of N×N tiles and its reconstruction (8 on 512²)")
    return p


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    res = run_benchmark(a.json, tuple(a.scan), tuple(a.detector), a.dtype, a.runs, a.trials,
                        a.seed, a.device, parity=not a.no_parity, map_tiles=a.map)
    print_table(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())

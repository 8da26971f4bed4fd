"""Device timing (CuPy): copy/FMA ceilings, per-candidate evaluation vs its floor."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..engine.cuda_kernels import EVAL_GROUPS
from .workload import FLOPS_PER_PAIR, random_candidates


def measure_ceilings() -> dict[str, float]:
    """Device-to-device copy bandwidth (read + write) and fp32 FMA peak."""
    import cupy as cp

    from ..engine import cuda_kernels as ck

    n = 1 << 29  # 2 GiB of float32
    a = cp.ones(n, dtype=cp.float32)
    b = cp.empty_like(a)
    for _ in range(2):
        b[...] = a
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(5):
        start.record()
        b[...] = a
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    bw = 2 * a.nbytes / float(np.median(times))
    del a, b
    fn = ck.function("fma_peak")
    props = cp.cuda.runtime.getDeviceProperties(0)
    sms = props["multiProcessorCount"]
    blocks, threads, iters = sms * 16, 256, 1 << 14
    out = cp.empty(blocks * threads, dtype=cp.float32)
    fn((blocks,), (threads,), (out, np.int32(iters), np.float32(0.999), np.float32(1e-3)))
    times = []
    for _ in range(5):
        start.record()
        fn((blocks,), (threads,), (out, np.int32(iters), np.float32(0.999), np.float32(1e-3)))
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    flops = 2.0 * 8 * iters * blocks * threads / float(np.median(times))
    del out
    cp.get_default_memory_pool().free_all_blocks()
    return {"copy_bandwidth_Bps": bw, "fp32_fma_peak_flops": flops}


def median_time(call: Callable[[], Any], repeats: int) -> float:
    """Median wall time of ``call`` with the device synchronised before and after."""
    import cupy as cp

    call()
    ts = []
    for _ in range(repeats):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        call()
        cp.cuda.Device().synchronize()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def full_field_session(scan: int, seed: int = 42) -> tuple[Any, Any]:
    """A CUDA session on the benchmark dataset (scan² × 192², uint16) with the full field
    prepared by a short fit: (session, fit). For kernel timing and profiling scripts."""
    from ..session import Session
    from .device_data import generate_dataset

    ds, _ = generate_dataset(scan=(scan, scan), detector=(192, 192), dtype="uint16", seed=seed)
    s = Session(ds, device="cuda")
    return s, s.fit(trials=8, seed=1, progress=False)


def candidate_timing(session: Any, ceilings: dict[str, float], trials: int) -> dict[str, Any]:
    """Per-candidate evaluation time on the full field vs its floor."""
    diag = session.diagnostics
    eng, sp = diag.engine, diag.full_spectra
    sizes = diag.full_field_sizes()
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {"n_bf": sizes["n_bf"], "M_half_plane": sizes["M_half_plane"],
                           "trotter_pairs": sizes["trotter_pairs"],
                           "all_pairs": sizes["n_bf"] * sizes["M_half_plane"]}
    bytes_G = sizes["spectra_bytes"]
    for K in (1, 8, trials // 2):
        cand = random_candidates(rng, K)
        t = median_time(functools.partial(eng.evaluate, sp, cand), 5) / K
        # Floor: the spectra read once per launch of eval_group candidates, and
        # FLOPS_PER_PAIR flops per in-trotter pair and candidate.
        group = min(eng.eval_group, K)
        floor_bytes = bytes_G / group / ceilings["copy_bandwidth_Bps"]
        floor_flops = sizes["trotter_pairs"] * FLOPS_PER_PAIR / ceilings["fp32_fma_peak_flops"]
        out[f"batch_{K}"] = {"per_candidate_s": t, "floor_bytes_s": floor_bytes,
                             "floor_flops_s": floor_flops,
                             "floor_s": max(floor_bytes, floor_flops),
                             "ratio_to_floor": t / max(floor_bytes, floor_flops)}
    # Candidates per thread (one read of the spectra per group) for a 100-candidate batch.
    cand = random_candidates(rng, 100)
    keep = eng.eval_group
    groups = {}
    for kc in EVAL_GROUPS:
        eng.eval_group = kc
        groups[str(kc)] = median_time(lambda: eng.evaluate(sp, cand), 1) / 100
    eng.eval_group = keep
    out["per_candidate_s_by_group"] = groups
    # Derivatives (3 Newton starts in lockstep).
    cand = np.array([[-80, 20, 0.5, 0, 0, 10]] * 3, dtype=float) + rng.normal(0, 1, (3, 6))
    out["derivatives_3_s"] = median_time(lambda: eng.derivatives(sp, cand), 3)
    out["derivatives_1_s"] = median_time(lambda: eng.derivatives(sp, cand[:1]), 3)
    out["flops_per_pair_assumed"] = FLOPS_PER_PAIR
    # The BF gather a session's open starts (asynchronously; the fit's first stage waits).
    counts = session.dataset.counts
    out["bf_gather_s"] = median_time(lambda: diag.upload_bf_counts(counts), 3)
    return out

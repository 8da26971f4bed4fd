"""Time the hot kernels compiled with other -D options on one dataset: a warp's tile of
frequencies (-DTILE_R/-DTILE_C, walk.cu's slot_bin), register budgets (-D*_MINB).

Usage: python3 benchmarks/kernel_variants.py OUT.json [scan]
Each variant: evaluate (100 candidates, eval groups 2/4), derivatives (3 candidates) and
one Auto reconstruction on the full field, and evaluate and derivatives on a 128² region
window (scan/4). Launch bounds do not change arithmetic: their results must be
bit-identical to the default's, which the script records (hashes). Another tile groups
other frequencies into blocks and warps, so its block partials add in another order and
its recurrences re-anchor elsewhere: hashes differ in the last bits there.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from typing import Any

import cupy as cp
import numpy as np

from livessb.bench.timing import full_field_session
from livessb.bench.workload import random_candidates
from livessb.engine import cuda_kernels as ck

VARIANTS = {  # the first compiled module's timings run cold: "warmup" absorbs that
    "warmup": (),
    "default": (),  # tiles of 4 × 8 frequencies
}
# Measured on the H100 and no faster than the default (not timed every run; 78189f5 and
# 2026-12-06, benchmarks/README.md "Tried"): "tile_1x32" (strips where tiles are used),
# "-DRECON_MINB=7" (reconstruct_kernel<1> without spills), three candidates a thread
# (vp_eval<3>: 2.36 ms per candidate, as two; four: 1.82), three or four spectra loads in
# flight in the masked walks (Auto 12.73 / 13.24 ms against 12.61), and the Auto
# reconstruction's strips in row families that read the same coarse spectra (12.27
# against 12.61 on one lease, 12.48 against 12.43 on another).
# Measured on the H200 at 3aefd1d and slower than the default (not timed every run):
# "-DEVAL_MINB4=3" / "=5" (vp_eval<4> 2.35 / 3.51 ms per candidate against 1.88),
# "-DDERIV_MINB=2" / "=4" (vp_derivs 36.5 / 30.4 ms for 3 candidates against 28.8).


def compile_variant(opts: tuple[str, ...]) -> Any:
    mod = cp.RawModule(code=ck.source(), options=("-std=c++17", *opts),
                       name_expressions=ck._names())
    mod.compile()
    return mod


def timed(fn: Any, reps: int) -> tuple[float, Any]:
    out = fn()
    cp.cuda.Device().synchronize()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        cp.cuda.Device().synchronize()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)), out


def digest(*arrays: Any) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def main() -> None:
    path = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 512
    s, fit = full_field_session(n)
    eng, sp = s.diagnostics.engine, s.diagnostics.full_spectra
    rng = np.random.default_rng(0)
    K = 100
    cand = random_candidates(rng, K)
    dcand = np.array([[-80, 20, 0.5, 0, 0, 10]] * 3, dtype=float) + rng.normal(0, 1, (3, 6))
    info = eng.spectra_info(sp)
    result: dict[str, Any] = {"pairs": info["trotter_pairs"], "M": info["half_plane"],
                              "B": sp.n_bf}
    assert sp.rotation is not None
    q = n // 4  # a region window of the benchmark's 128² region at 512²
    region = eng.prepare((3 * q // 2, 5 * q // 2, 3 * q // 2, 5 * q // 2))
    eng.set_rotation(region, *sp.rotation)
    for name, opts in VARIANTS.items():
        mod = compile_variant(opts)
        ck.module = lambda alias=False, mod=mod: mod  # type: ignore[assignment]
        for part in (sp.part, region.part):  # per-warp masks follow the tile shape
            part.lobe_masks = None
            part.fine_masks.clear()
        row: dict[str, Any] = {}
        for kc in ck.EVAL_GROUPS[1:]:
            eng.eval_group = kc
            t, losses = timed(lambda: eng.evaluate(sp, cand), 3)
            row[f"eval_group{kc}_per_candidate_ms"] = t / K * 1e3
            row[f"eval_group{kc}_hash"] = digest(losses)
        eng.eval_group = 4
        t, d = timed(lambda: eng.derivatives(sp, dcand), 3)
        row["derivatives_3_ms"] = t * 1e3
        row["derivatives_hash"] = digest(*d)
        t, rec = timed(lambda: s.reconstruct(fit.params), 3)
        row["reconstruct_auto_ms"] = t * 1e3
        row["reconstruct_hash"] = rec.phase_hash()
        t, _ = timed(lambda: eng.evaluate(sp, cand[:1]), 5)
        row["eval_1_candidate_ms"] = t * 1e3
        t, losses = timed(lambda: eng.evaluate(region, cand), 3)
        row["region_eval_per_candidate_ms"] = t / K * 1e3
        row["region_eval_hash"] = digest(losses)
        t, d = timed(lambda: eng.derivatives(region, dcand), 3)
        row["region_derivatives_3_ms"] = t * 1e3
        result[name] = row
        print(name, json.dumps(row), flush=True)
    s.close()
    with open(path, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()

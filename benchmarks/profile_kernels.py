"""Launch the hot kernels once each inside a profiler range (for `ncu --profile-from-start off`).

Usage: bash benchmarks/ncu_profile.sh [scan] (runs this under ncu)
"""

from __future__ import annotations

import sys
import time

import cupy as cp
import numpy as np

from livessb.bench.timing import full_field_session
from livessb.bench.workload import random_candidates


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 512
    s, _ = full_field_session(n)
    eng, sp = s.diagnostics.engine, s.diagnostics.full_spectra
    K = 8
    cand = random_candidates(np.random.default_rng(0), K)
    eng.evaluate(sp, cand)
    eng.derivatives(sp, cand[:2])
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    eng.evaluate(sp, cand)
    cp.cuda.Device().synchronize()
    info = eng.spectra_info(sp)
    print("eval 8:", time.perf_counter() - t0, "pairs", info["trotter_pairs"], "M",
          info["half_plane"], "B", sp.n_bf, flush=True)
    thetas = np.radians(s.rotation_deg) + np.radians(np.linspace(-3.0, 3.0, 25))
    eng.evaluate_rotations(sp, thetas, s.transpose, cand[:1])
    s.reconstruct()
    cp.cuda.profiler.start()
    eng.evaluate(sp, cand)
    eng.derivatives(sp, cand[:2])
    eng.evaluate_rotations(sp, thetas, s.transpose, cand[:1])
    s.reconstruct()
    cp.cuda.Device().synchronize()
    cp.cuda.profiler.stop()
    s.close()


if __name__ == "__main__":
    main()

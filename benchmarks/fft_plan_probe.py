"""First use of new FFT sizes (regions of new shapes): CUDA module loading and the JIT cache.

Usage: python3 benchmarks/fft_plan_probe.py OUT.json
Each mode runs in a fresh process (the setting is read when CUDA starts): after one
small transform (cuFFT initialised), batched R2C plans of the region shapes a session
would prepare are created and run once; the time of each new shape's plan + first
execution is recorded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

SHAPES = [((128, 128), 1362), ((135, 135), 1200), ((150, 144), 1000), ((160, 160), 1000),
          ((180, 180), 800), ((256, 256), 340), ((250, 243), 340), ((384, 360), 150)]


def child() -> None:
    import cupy as cp
    import cupyx.scipy.fft as cfft

    def timed(fn):  # type: ignore[no-untyped-def]
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        fn()
        cp.cuda.Device().synchronize()
        return 1e3 * (time.perf_counter() - t0)

    out = {"first_transform_ms": timed(lambda: cp.fft.rfft2(cp.zeros((8, 64, 64), cp.float32)))}
    for shape, batch in SHAPES:
        a = cp.zeros((batch, *shape), cp.float32)

        def plan_and_run(a=a) -> None:  # type: ignore[no-untyped-def]
            plan = cfft.get_fft_plan(a, axes=(-2, -1), value_type="R2C")
            with plan:
                cp.fft.rfft2(a)

        out[f"{shape[0]}x{shape[1]} batch {batch}"] = timed(plan_and_run)
    print(json.dumps(out))


def main() -> None:
    """Each run in a fresh process: module loading LAZY or EAGER, with an empty CUDA JIT
    cache (CUDA_CACHE_PATH) or with the cache the previous run filled."""
    result = {}
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        for name, mode, cache in (("lazy, empty JIT cache", "LAZY", a),
                                  ("eager, empty JIT cache", "EAGER", b),
                                  ("lazy, JIT cache of the first run", "LAZY", a)):
            env = dict(os.environ, CUDA_MODULE_LOADING=mode, CUDA_CACHE_PATH=cache)
            run = subprocess.run([sys.executable, __file__, "--child"], env=env, check=True,
                                 capture_output=True, text=True)
            result[name] = json.loads(run.stdout.strip().splitlines()[-1])
            print(name, result[name], flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    child() if sys.argv[1:] == ["--child"] else main()

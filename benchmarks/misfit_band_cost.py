"""What the frequency bands (fit/systematic) add to the misfit pass on the GPU, one
process: the device work after vp_derivs on a 512² half plane (M = 131584), as in
``CUDAEngine.misfit_terms``, each with its download: the per-ν gradient terms alone
(the code before the bands), ``misfit_sums`` with the window's radial order sorted
once on the host (what the engine does) and with the order sorted on the device per
call (the first version, 0d99c6e). Warm medians.

    python benchmarks/misfit_band_cost.py OUT.json
"""

from __future__ import annotations

import json
import os
import sys
import time

import cupy as cp
import numpy as np

from livessb.engine.cuda.derivs import misfit_sums
from livessb.physics.objective import radial_order
from livessb.xp import to_host

M = 512 * 257
REPEATS = 50


def _timed(fn) -> float:  # type: ignore[no-untyped-def]
    for _ in range(5):
        to_host(fn())
    out = []
    for _ in range(REPEATS):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        to_host(fn())
        out.append(time.perf_counter() - t0)
    return float(np.median(out))


def main() -> None:
    rng = np.random.default_rng(0)
    per_nu = cp.asarray(rng.normal(size=(2, 8, M)))
    nu_r = cp.asarray(np.repeat(np.fft.fftfreq(512, 0.5), 257))
    nu_c = cp.asarray(np.tile(np.fft.rfftfreq(512, 0.5), 512))
    before = _timed(lambda: (per_nu[0] + per_nu[1])[1:7].ravel())
    radius, order = radial_order((512, 512), (0.5, 0.5))
    radial = (cp.asarray(radius), cp.asarray(order))
    bands = _timed(lambda: misfit_sums(cp, per_nu, radial))
    nu_abs = cp.hypot(nu_r, nu_c)
    sorted_each_call = _timed(lambda: misfit_sums(
        cp, per_nu, (nu_abs, cp.argsort(nu_abs))))
    record = {"M": M, "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
              "commit": os.environ.get("LIVESSB_COMMIT", "unknown"),
              "gradient_terms_only_ms": before * 1e3, "misfit_sums_ms": bands * 1e3,
              "misfit_sums_sorted_on_device_ms": sorted_each_call * 1e3}
    print(json.dumps(record))
    with open(sys.argv[1], "w") as f:
        json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()

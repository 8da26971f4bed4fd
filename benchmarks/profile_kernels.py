"""Profile the CUDA engine's hot kernels once each (run under ``ncu``).

    ncu --clock-control none --section SpeedOfLight --section WarpStateStats \
        --section ComputeWorkloadAnalysis -k regex:"vp_" --launch-count 2 \
        python benchmarks/profile_kernels.py
"""

from __future__ import annotations

import numpy as np

from livessb.engine.cuda import CUDAEngine
from livessb.physics.geometry import estimate_rotation
from livessb.synthetic_gpu import generate_dataset

ds, truth = generate_dataset(scan=(256, 256), detector=(192, 192), seed=1)
eng = CUDAEngine(ds)
rot = estimate_rotation(eng.bf_center_of_mass(), ds.scan_step_A)
sp = eng.prepare(None)
eng.set_rotation(sp, rot.theta, rot.transpose)
rng = np.random.default_rng(0)
cand = np.column_stack([rng.uniform(-500, 500, 100), rng.uniform(0, 100, 100),
                        rng.uniform(-1.5, 1.5, 100), rng.uniform(-15, 15, 100),
                        rng.uniform(-15, 15, 100), rng.uniform(0, 500, 100)])
print(eng.evaluate(sp, cand)[:3])
print(eng.derivatives(sp, cand[:3])[0])
eng.close()

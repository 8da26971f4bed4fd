"""The golden record: exact trial/Newton records, losses and image hashes of CPU fits.

Written once before a refactor (`python tests/golden/make_golden.py`); the test
`tests/test_golden.py` recomputes it and demands the same bits. Re-record only for a
change that is meant to alter results, and say so in the commit.

The bits depend on the CPU as well as on the pinned releases (constraints.txt): Numba
and NumPy pick SIMD code paths by what the CPU offers, and the same code gave losses
that differ in the 14th digit on an AVX2 machine. So each kind of CPU has its own
record, ``golden-<machine_kind()>.json`` (``--machine`` writes this machine's);
``golden.json`` is the record the project started from (made on a CPU not noted).
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).parent
RECORD = HERE / "golden.json"
SIMD_FLAGS = ("avx512f", "avx2", "fma")  # what changes Numba/NumPy code paths


def machine_kind() -> str:
    """e.g. "x86_64-avx2-fma": the architecture and the SIMD flags the CPU has."""
    import platform

    flags: set[str] = set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    return "-".join([platform.machine()] + [f for f in SIMD_FLAGS if f in flags])


def machine_record() -> Path:
    return HERE / f"golden-{machine_kind()}.json"


def _digest(x: Any) -> str:
    return hashlib.sha256(json.dumps(x, sort_keys=True, default=float).encode()).hexdigest()


def _array_hash(a: np.ndarray) -> str:
    a = np.ascontiguousarray(a)
    return hashlib.sha256(a.tobytes() + str(a.dtype).encode() + str(a.shape).encode()).hexdigest()


def _fit_record(fit: Any) -> dict[str, Any]:
    return {"params": {k: float(v) for k, v in fit.params.items()}, "loss": float(fit.loss),
            "rotation_deg": float(fit.rotation_deg), "transpose": bool(fit.transpose),
            "trials": _digest(fit.trials), "newton": _digest(fit.newton),
            "n_trials": len(fit.trials), "n_newton": len(fit.newton),
            "branches": _digest([{k: v for k, v in b.items()} for b in fit.branches]),
            "on_box_edge": list(fit.on_box_edge)}


def _case(ds: Any, region: tuple[int, int, int, int], trials: int) -> dict[str, Any]:
    import livessb

    out: dict[str, Any] = {}
    with livessb.Session(ds, device="cpu") as s:
        full = s.fit(trials=trials, seed=42, progress=False)
        out["full"] = _fit_record(full)
        reg = s.fit_region(region, trials=trials, seed=42)
        out["region"] = _fit_record(reg.fit)
        out["region_crop"] = _array_hash(reg.crop.object)
        rec = s.reconstruct(full.params)
        out["auto_reconstruction"] = {"hash": _array_hash(rec.object),
                                      "upsample": rec.upsample}
        out["reconstruction_1x_wiener"] = _array_hash(
            s.reconstruct(reg.params, upsample=1, method="wiener").object)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "cal.json"
            s.save_calibration(path)
            with livessb.Session(ds, device="cpu", calibration=path) as s2:
                restored = s2.regions[reg.id]
                assert s2.full_fit is not None and s2.rotation_deg is not None
                out["restore"] = {
                    "full_params": {k: float(v) for k, v in s2.full_fit.params.items()},
                    "rotation_deg": float(s2.rotation_deg),
                    "region_crop": _array_hash(restored.crop.object),
                    "auto_reconstruction": _array_hash(s2.reconstruct().object)}
    return out


def compute() -> dict[str, Any]:
    import livessb.simulate as sim

    demo = sim.demo_dataset()
    thick, _ = sim.simulate_4dstem(
        scan_shape=(32, 32), detector_shape=(40, 40), dose=None, seed=3, phase_peak_rad=0.1,
        aberrations={"C10": 30.0, "C12": 8.0, "phi12": 0.3}, depth_A=150.0,
        tilt_mrad=(6.0, -3.0))
    return {"demo": _case(demo, (8, 40, 2, 34), 200),
            "thick_tilted": _case(thick, (4, 28, 6, 30), 100)}


if __name__ == "__main__":
    out = machine_record() if "--machine" in sys.argv[1:] else RECORD
    out.write_text(json.dumps(compute(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {out}")

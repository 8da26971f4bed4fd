"""Parity before timing: a small simulated dataset through the CPU and CUDA engines."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..params import from_vector

if TYPE_CHECKING:
    from ..engine.protocol import Engine, Spectra


def parity_check(device: str = "cuda", seed: int = 7) -> dict[str, Any]:
    """Losses, derivatives and reconstructions CPU vs CUDA; the same inputs twice on the device."""
    from ..engine.cpu import CPUEngine
    from ..engine.cuda import CUDAEngine
    from ..physics.geometry import estimate_rotation
    from ..simulate import simulate_4dstem

    ds, truth = simulate_4dstem(
        scan_shape=(32, 32), detector_shape=(32, 32), scan_step_A=0.6,
        aberrations={"C10": -40.0, "C12": 12.0, "phi12": 0.4}, depth_A=60.0,
        tilt_mrad=(4.0, -3.0), slice_A=20.0, rotation_deg=10.0, dose=2e4, seed=seed)
    rng = np.random.default_rng(seed)
    # Candidates (JOINT order) in a box around the truth; row 0 is the truth itself.
    cand = np.column_stack([rng.uniform(-150, 150, 12), rng.uniform(0, 40, 12),
                            rng.uniform(-1.5, 1.5, 12), rng.uniform(-10, 10, 12),
                            rng.uniform(-10, 10, 12), rng.uniform(0, 200, 12)])
    cand[0] = [-40, 12, 0.4, 4, -3, 60]
    cand[1, 5] = 0.0
    out: dict[str, Any] = {}
    engines: dict[str, Engine] = {"cpu": CPUEngine(ds), "cuda": CUDAEngine(ds)}
    full: dict[str, Spectra] = {}  # each engine's full-field spectra
    res: dict[str, Any] = {}
    try:
        for name, eng in engines.items():
            com = eng.bf_center_of_mass()
            rot = estimate_rotation(com, ds.scan_step_A)
            sp = full[name] = eng.prepare(None)
            eng.set_rotation(sp, rot.theta, rot.transpose)
            spr = eng.prepare((3, 29, 2, 30))
            eng.set_rotation(spr, rot.theta, rot.transpose)
            res[name] = {
                "theta": rot.theta, "energy": sp.energy, "loss": eng.evaluate(sp, cand),
                "loss_region": eng.evaluate(spr, cand),
                "deriv": eng.derivatives(sp, cand[:3]),
                "phase1": np.angle(eng.reconstruct(sp, from_vector(cand[0]), 1, "ssb")),
                "phase3": np.angle(eng.reconstruct(sp, {"C10": -40.0, "C12": 12.0,
                                                        "phi12": 0.4}, 3, "ssb")),
                "wiener": eng.reconstruct(sp, {"C10": -40.0}, 2, "wiener"),
            }
        a, b = res["cpu"], res["cuda"]
        rel = lambda x, y: float(np.max(np.abs(x - y) / np.maximum(np.abs(x), 1e-30)))  # noqa: E731
        out["theta_abs_diff"] = abs(a["theta"] - b["theta"])
        out["energy_rel"] = abs(a["energy"] - b["energy"]) / a["energy"]
        out["loss_max_rel"] = rel(a["loss"], b["loss"])
        out["loss_region_max_rel"] = rel(a["loss_region"], b["loss_region"])
        out["deriv_loss_max_rel"] = rel(a["deriv"][0], b["deriv"][0])
        g_a, g_b = a["deriv"][1], b["deriv"][1]
        out["grad_rel_norm"] = float(np.linalg.norm(g_a - g_b) / np.linalg.norm(g_a))
        h_a, h_b = a["deriv"][2], b["deriv"][2]
        out["hess_rel_norm"] = float(np.linalg.norm(h_a - h_b) / np.linalg.norm(h_a))
        e, sp_cuda = engines["cuda"], full["cuda"]
        out["eval_vs_deriv_loss_max_rel"] = rel(
            e.evaluate(sp_cuda, cand[:3]), e.derivatives(sp_cuda, cand[:3])[0])
        wrap = lambda d: np.abs(np.angle(np.exp(1j * d)))  # noqa: E731
        out["phase1_max_abs"] = float(wrap(a["phase1"] - b["phase1"]).max())
        out["phase3_max_abs"] = float(wrap(a["phase3"] - b["phase3"]).max())
        out["wiener_rel"] = float(np.abs(a["wiener"] - b["wiener"]).max()
                                  / np.abs(a["wiener"]).max())
        # Same inputs twice on the device: identical bits.
        l1, l2 = e.evaluate(sp_cuda, cand), e.evaluate(sp_cuda, cand)
        d1, d2 = e.derivatives(sp_cuda, cand[:3]), e.derivatives(sp_cuda, cand[:3])
        out["device_repeat_bitwise"] = bool(np.array_equal(l1, l2) and all(
            np.array_equal(x, y) for x, y in zip(d1, d2, strict=True)))
        out["truth"] = truth.params
    finally:
        for eng in engines.values():
            eng.close()
    out["pass"] = bool(out["loss_max_rel"] < 1e-5 and out["loss_region_max_rel"] < 1e-5
                       and out["phase1_max_abs"] < 2e-4 and out["phase3_max_abs"] < 2e-4
                       and out["device_repeat_bitwise"])
    return out

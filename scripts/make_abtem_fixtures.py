"""Generate small abTEM 4D-STEM fixtures (independent simulator) for livessb tests.

Run with an environment that has abTEM 1.0.x and ase (kept out of livessb's
dependencies on purpose), e.g.::

    python -m venv /tmp/abtem_venv && /tmp/abtem_venv/bin/pip install abtem
    /tmp/abtem_venv/bin/python scripts/make_abtem_fixtures.py  [--out tests/fixtures/abtem]

Writes one compressed .npz per dataset (see tests/fixtures/abtem/README.md for
the keys, parameters and conventions). Deterministic: fixed structure,
parameters and Poisson seed.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

A_STO = 3.905  # SrTiO3 lattice constant, Å
ENERGY_EV = 200e3
SEMIANGLE_MRAD = 20.0
CELLS_LATERAL = 4  # potential extent 4a = 15.62 Å (periodic), detector pixel 1/(4a)
GPTS = 96  # real-space pixel 0.163 Å; abTEM's anti-aliasing cutoff leaves 64x64 pixels
DETECTOR = 40  # central crop of the 64x64 patterns (BF radius ≈ 12.5 px)
SCAN = 24  # 24x24 positions
STEP_A = 0.6
DOSE = 1e6  # electrons per position (Poisson), near-noiseless but integer counts
SLICE_A = A_STO / 2  # one atomic plane per slice
MANTISSA_BITS = 10  # noiseless fixtures: relative precision 1e-3

DATASETS = [
    # name, unit cells along the beam, abTEM C10 (= -defocus, at the entrance surface),
    # C12, phi12, abTEM probe tilt (mrad, (x, y))
    {"name": "srtio3_thin", "cells_z": 1, "C10": -40.0, "C12": 20.0, "phi12": 0.6,
     "tilt_mrad": (0.0, 0.0)},
    {"name": "srtio3_39A", "cells_z": 10, "C10": -40.0, "C12": 20.0, "phi12": 0.6,
     "tilt_mrad": (0.0, 0.0)},
    # A weakly scattering crystal (SrTiO3 potential scaled so that the whole slab's peak
    # phase is 0.3 rad), 38 cells = 148.4 Å thick, tilted: the SPEC §2 thick-sample case.
    {"name": "weak_slab_148A_tilt", "cells_z": 38, "C10": -120.0, "C12": 15.0,
     "phi12": -0.4, "tilt_mrad": (8.0, -4.0), "total_phase_rad": 0.3, "noiseless": True},
]


def _round_mantissa(x: np.ndarray, bits: int) -> np.ndarray:
    """Round float32 values to ``bits`` mantissa bits (round half up on the bit pattern)."""
    drop = 23 - bits
    u = x.view(np.uint32).astype(np.uint64)
    u = ((u + (1 << (drop - 1))) >> drop) << drop
    return u.astype(np.uint32).view(np.float32)


def srtio3_cell():  # -> ase.Atoms
    from ase import Atoms

    return Atoms(
        "SrTiO3",
        scaled_positions=[(0, 0, 0), (0.5, 0.5, 0.5), (0.5, 0.5, 0), (0.5, 0, 0.5), (0, 0.5, 0.5)],
        cell=[A_STO, A_STO, A_STO],
        pbc=True,
    )


def simulate(spec: dict, seed: int) -> dict:
    import abtem
    import ase
    from abtem.core.energy import energy2sigma

    atoms = srtio3_cell().repeat((CELLS_LATERAL, CELLS_LATERAL, spec["cells_z"]))
    thickness = float(atoms.cell[2, 2])
    potential = abtem.Potential(atoms, gpts=GPTS, slice_thickness=SLICE_A,
                                projection="infinite", parametrization="lobato")
    sigma = float(energy2sigma(ENERGY_EV))  # rad / (V Å)
    slices = np.asarray(potential.build().compute().array)  # (n_slices, x, y), V Å
    peak_phase = sigma * float(slices.sum(axis=0).max())
    scale = 1.0
    if spec.get("total_phase_rad"):
        scale = spec["total_phase_rad"] / peak_phase
        potential = abtem.PotentialArray((slices * scale).astype(np.float32),
                                         slice_thickness=SLICE_A,
                                         extent=(float(atoms.cell[0, 0]), float(atoms.cell[1, 1])))
        peak_phase *= scale
    probe = abtem.Probe(energy=ENERGY_EV, semiangle_cutoff=SEMIANGLE_MRAD,
                        C10=spec["C10"], C12=spec["C12"], phi12=spec["phi12"],
                        tilt=tuple(spec["tilt_mrad"]))
    scan = abtem.GridScan(start=(0.0, 0.0), end=(SCAN * STEP_A, SCAN * STEP_A),
                          gpts=(SCAN, SCAN), endpoint=False)
    detector = abtem.PixelatedDetector(max_angle="cutoff")
    t0 = time.perf_counter()
    meas = probe.scan(potential, scan=scan, detectors=detector).compute(progress_bar=False)
    print(f"{spec['name']}: abTEM scan took {time.perf_counter() - t0:.1f} s")
    arr = np.asarray(meas.array, dtype=np.float64)  # (x, y, kx, ky), fftshifted
    n = arr.shape[-1]
    c = n // 2  # zero frequency after fftshift
    h = DETECTOR // 2
    crop = arr[..., c - h:c + h, c - h:c + h]
    # Normalise each pattern to the probe's total intensity (abTEM's is ~1 over the full
    # 64x64 window); the crop loses a little high-angle scattering.
    intensity = crop / arr.sum(axis=(-2, -1), keepdims=True)
    if spec.get("noiseless"):
        # Noiseless float32 intensities (each pattern sums to <= 1), mantissa rounded to
        # MANTISSA_BITS bits (relative precision 2^-MANTISSA_BITS) so the file compresses.
        counts = _round_mantissa(intensity.astype(np.float32), MANTISSA_BITS)
        dose = 0.0
    else:
        rng = np.random.default_rng(seed)
        counts = rng.poisson(intensity * DOSE).astype(np.uint16)
        assert counts.max() < 65535
        dose = DOSE
    sampling_mrad = float(meas.angular_sampling[0])
    assert abs(meas.angular_sampling[0] - meas.angular_sampling[1]) < 1e-9
    tilt = np.asarray(spec["tilt_mrad"], dtype=float)
    return {
        "counts": counts,
        "voltage_kV": np.float64(ENERGY_EV / 1e3),
        "semiangle_mrad": np.float64(SEMIANGLE_MRAD),
        "scan_step_A": np.array([STEP_A, STEP_A]),
        "detector_sampling_mrad": np.float64(sampling_mrad),
        "dose": np.float64(dose),  # 0 for noiseless float32 intensities
        "seed": np.int64(seed),
        "bf_center_px": np.array([float(h), float(h)]),
        "thickness_A": np.float64(thickness),
        "phase_peak_rad": np.float64(peak_phase),  # σ·max of the total projected potential
        "potential_scale": np.float64(scale),
        # livessb truth (SPEC §2): C10 at the slab mid-plane, depth = t, tilt = -abTEM tilt.
        "truth_C10": np.float64(spec["C10"] + thickness / 2),
        "truth_C12": np.float64(spec["C12"]),
        "truth_phi12": np.float64(spec["phi12"]),
        "truth_tilt_row_mrad": np.float64(-tilt[0]),
        "truth_tilt_col_mrad": np.float64(-tilt[1]),
        "truth_depth": np.float64(thickness),
        "truth_rotation_deg": np.float64(0.0),
        "truth_transpose": np.bool_(False),
        # What abTEM was given (aberrations at the entrance surface).
        "abtem_C10": np.float64(spec["C10"]),
        "abtem_C12": np.float64(spec["C12"]),
        "abtem_phi12": np.float64(spec["phi12"]),
        "abtem_tilt_mrad": tilt,
        "abtem_version": np.str_(abtem.__version__),
        "ase_version": np.str_(ase.__version__),
        "params_json": np.str_(json.dumps({
            "structure": f"SrTiO3 [001], a={A_STO} A, {CELLS_LATERAL}x{CELLS_LATERAL}x"
                         f"{spec['cells_z']} cells, periodic",
            "potential": {"gpts": GPTS, "slice_thickness_A": SLICE_A,
                          "projection": "infinite", "parametrization": "lobato",
                          "scale": scale, "peak_phase_rad": peak_phase},
            "probe": {"energy_eV": ENERGY_EV, "semiangle_cutoff_mrad": SEMIANGLE_MRAD,
                      "C10": spec["C10"], "C12": spec["C12"], "phi12": spec["phi12"],
                      "tilt_mrad": list(spec["tilt_mrad"])},
            "scan": {"gpts": [SCAN, SCAN], "step_A": STEP_A, "start_A": [0.0, 0.0]},
            "detector": {"crop_px": DETECTOR, "from_px": n},
        })),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1]
                                         / "tests" / "fixtures" / "abtem"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for i, spec in enumerate(DATASETS):
        data = simulate(spec, seed=1000 + i)
        path = out / f"{spec['name']}.npz"
        np.savez_compressed(path, **data)
        print(f"{path}: {data['counts'].shape} {data['counts'].dtype}, "
              f"{path.stat().st_size / 1e6:.2f} MB, t={float(data['thickness_A']):.2f} A, "
              f"truth C10={float(data['truth_C10']):.2f} A, "
              f"sampling={float(data['detector_sampling_mrad']):.4f} mrad/px")


if __name__ == "__main__":
    main()

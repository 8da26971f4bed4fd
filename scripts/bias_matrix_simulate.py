"""Simulate the cases of the bias matrix with abTEM (an independent multislice code).

Run with an interpreter that has abTEM 1.0.x (kept out of livessb's dependencies), as
``scripts/bias_matrix.py`` does::

    /path/to/abtem-venv/bin/python scripts/bias_matrix_simulate.py CASES.json OUT_DIR

CASES.json is a list of case dicts (``scripts/bias_matrix.py`` writes it); one .npz
per case lands in OUT_DIR (skipped when present). Keys as tests/fixtures/abtem/README.md,
truth in livessb's conventions (SPEC §2: C10 at the specimen's mid-plane, here the
centroid of abTEM's slice planes, ``potential_plane``; τ = −abTEM tilt; depth = t).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

A_STO = 3.905  # SrTiO3 lattice constant, Å
REAL_PX_A = 15.62 / 96  # real-space pixel of the potential (abTEM cuts 2/3 → detector)
CARBON_PER_A3 = 0.1  # amorphous carbon, ~2 g/cm³


def srtio3(cells_lateral: int, cells_z: int) -> Any:
    from ase import Atoms

    cell = Atoms("SrTiO3", scaled_positions=[(0, 0, 0), (0.5, 0.5, 0.5), (0.5, 0.5, 0),
                                             (0.5, 0, 0.5), (0, 0.5, 0.5)],
                 cell=[A_STO] * 3, pbc=True)
    return cell.repeat((cells_lateral, cells_lateral, cells_z))


def amorphous_carbon(extent_A: float, thickness_A: float, seed: int) -> Any:
    """Random carbon with a 1.2 Å hard-sphere exclusion (no two atoms on top)."""
    from ase import Atoms

    rng = np.random.default_rng(seed)
    n = int(CARBON_PER_A3 * extent_A * extent_A * thickness_A)
    box = np.array([extent_A, extent_A, thickness_A])
    kept: list[np.ndarray] = []
    grid: dict[tuple[int, int, int], list[np.ndarray]] = {}
    while len(kept) < n:
        p = rng.random(3) * box
        key = tuple(int(v) // 2 for v in p)
        near = [q for dx in (-1, 0, 1) for dy in (-1, 0, 1) for dz in (-1, 0, 1)
                for q in grid.get((key[0] + dx, key[1] + dy, key[2] + dz), [])]
        d = [np.linalg.norm((p - q + box / 2) % box - box / 2) for q in near]
        if d and min(d) < 1.2:
            continue
        kept.append(p)
        grid.setdefault(key, []).append(p)  # type: ignore[arg-type]
    return Atoms(f"C{n}", positions=np.array(kept), cell=box, pbc=True)


def potential_plane(slices: np.ndarray, slice_A: float) -> float:
    """The depth (Å below the entrance surface) at which the specimen scatters: the
    centroid of the slices' planes weighted by their phase contrast (rms of each slice's
    projected potential about its mean). abTEM applies a slice's potential at the slice's
    entrance plane (then propagates), so one SrTiO3 cell scatters from z = 0 (SrO) and
    a/2 (TiO2): centroid 0.90 Å, not t/2 = 1.95 Å. The same offset holds for every
    thickness; a uniform thick slab sits at its mid-plane."""
    weights = slices.reshape(len(slices), -1).std(axis=1)
    planes = np.arange(len(slices)) * slice_A
    return float((planes * weights).sum() / weights.sum())


def simulate(case: dict[str, Any]) -> dict[str, Any]:
    import abtem
    from abtem.core.energy import energy2sigma

    lateral = int(case["cells_lateral"])
    if case["structure"] == "amorphous":
        extent = lateral * A_STO
        atoms = amorphous_carbon(extent, float(case["thickness_A"]), int(case["seed"]))
        slice_A = 2.0
    else:
        atoms = srtio3(lateral, int(case["cells_z"]))
        slice_A = float(case.get("slice_A", A_STO / 2))
    thickness = float(atoms.cell[2, 2])
    extent = float(atoms.cell[0, 0])
    gpts = round(extent / REAL_PX_A / 2) * 2
    potential = abtem.Potential(atoms, gpts=gpts, slice_thickness=slice_A,
                                projection="infinite", parametrization="lobato")
    sigma = float(energy2sigma(case["energy_eV"]))
    slices = np.asarray(potential.build().compute().array)
    plane_A = potential_plane(slices, slice_A)
    peak_phase = sigma * float(slices.sum(axis=0).max())
    scale = 1.0
    if case.get("total_phase_rad"):
        scale = case["total_phase_rad"] / peak_phase
        potential = abtem.PotentialArray((slices * scale).astype(np.float32),
                                         slice_thickness=slice_A, extent=(extent, extent))
        peak_phase *= scale
    probe = abtem.Probe(energy=case["energy_eV"], semiangle_cutoff=case["semiangle_mrad"],
                        C10=case["abtem_C10"], C12=case["C12"], phi12=case["phi12"],
                        tilt=tuple(case["tilt_mrad"]))
    n, step = int(case["scan"]), float(case["step_A"])
    scan = abtem.GridScan(start=(0.0, 0.0), end=(n * step, n * step), gpts=(n, n),
                          endpoint=False)
    t0 = time.perf_counter()
    meas = probe.scan(potential, scan=scan, detectors=abtem.PixelatedDetector(
        max_angle="cutoff")).compute(progress_bar=False)
    arr = np.asarray(meas.array, dtype=np.float64)  # (x, y, kx, ky), fftshifted
    sampling = float(meas.angular_sampling[0])
    bf_radius_px = case["semiangle_mrad"] / sampling
    half = min(arr.shape[-1] // 2, int(np.ceil(bf_radius_px * 1.6)))
    c = arr.shape[-1] // 2
    intensity = arr[..., c - half:c + half, c - half:c + half] / arr.sum(
        axis=(-2, -1), keepdims=True)
    bin_by = int(case.get("bin", 1))
    if bin_by > 1:  # pixel integration, as a real detector: sum bin×bin blocks
        m = (2 * half) // bin_by * bin_by
        intensity = intensity[..., :m, :m].reshape(n, n, m // bin_by, bin_by,
                                                    m // bin_by, bin_by).sum(axis=(3, 5))
    rng = np.random.default_rng(int(case["seed"]))
    counts = rng.poisson(intensity * case["dose"]).astype(np.uint32)
    tilt = np.asarray(case["tilt_mrad"], dtype=float)
    centre = (half - 0.5 * (bin_by - 1)) / bin_by if bin_by > 1 else float(half)
    print(f"{case['name']}: abTEM {time.perf_counter() - t0:.1f} s, detector "
          f"{counts.shape[-1]}² px, BF radius {bf_radius_px / bin_by:.1f} px", flush=True)
    return {
        "counts": counts,
        "voltage_kV": np.float64(case["energy_eV"] / 1e3),
        "semiangle_mrad": np.float64(case["semiangle_mrad"]),
        "scan_step_A": np.array([step, step]),
        "detector_sampling_mrad": np.float64(sampling * bin_by),
        "dose": np.float64(case["dose"]),
        "bf_center_px": np.array([centre, centre]),
        "bf_radius_px": np.float64(bf_radius_px / bin_by),
        "thickness_A": np.float64(thickness),
        "phase_peak_rad": np.float64(peak_phase),
        "truth_C10": np.float64(case["abtem_C10"] + plane_A),
        "potential_plane_A": np.float64(plane_A),
        "truth_C12": np.float64(case["C12"]),
        "truth_phi12": np.float64(case["phi12"]),
        "truth_tilt_row_mrad": np.float64(-tilt[0]),
        "truth_tilt_col_mrad": np.float64(-tilt[1]),
        "truth_depth": np.float64(thickness),
        "abtem_version": np.str_(abtem.__version__),
        "case_json": np.str_(json.dumps(case)),
    }


def main() -> None:
    cases = json.loads(Path(sys.argv[1]).read_text())
    out = Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    for case in cases:
        path = out / f"{case['name']}.npz"
        if path.exists():
            continue
        data = simulate(case)
        tmp = path.with_suffix(".tmp.npz")
        np.savez_compressed(tmp, **data)
        tmp.replace(path)


if __name__ == "__main__":
    main()

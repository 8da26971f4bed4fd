"""A lattice model of a crystal's spectra, against the package's per-bin model (issue 20).

The package fits each spectrum bin ν as one frequency (its measured, "effective" one) with
a free object per trotter lobe. A crystal's signal lives at its lattice frequencies g,
and a finite window spreads each over every bin: the measured spectrum is

    G(ν, k) = Σ_g W(g − ν) c_g(k),   W(x) = Σ_{R<n} e^{2πi x·R·step} (per axis, a product),

so a bin carries several lattice frequencies at once (docs/bias-matrix.md §14: even the
strongest bins of a 16² window are far from one tone) and the aliases of an undersampled
scan (W is periodic in x with period 1/step) land on bins with their own Γ. The lattice
model writes each c_g(k) as the per-lobe model at g itself, Γ_lobe(k; g)·O_lobe(g), and
fits every O jointly. Its variable projection is cheap, because W factors out of the
normal equations (the DC bin, the mean, left out):

    Aᴴy[(g, l)]        = Σ_k Γ_l*(k; g) · N Σ_R I′(R, k) e^{−2πi g·R·step}
    AᴴA[(g, l), (g′, l′)] = (N W(g′ − g) − W*(g) W(g′)) · Σ_k Γ_l*(k; g) Γ_l′(k; g′)

(N positions, I′ the mean-removed counts), and the loss is −(Aᴴy)ᴴ(AᴴA)⁻¹(Aᴴy) plus a
constant. Where the lattice fits the window, W(g − ν) is one bin's delta and the model
is the package's per-bin one at g.

    python scripts/lattice_profiles.py ~/.cache/livessb/bias-matrix/sto1_C10-80.npz ...
    python scripts/lattice_profiles.py --window 16 CASES...   # the first 16² positions
    python scripts/lattice_profiles.py --demo 5e4 --window 16  # the demo's 16² regions

prints the conditional C10 minimum (every other parameter at the truth) minus the truth
of the per-bin model at the effective frequencies (``bias_profiles``) and of the lattice
model, with the lattice given (SrTiO3 [001], a = 3.905 Å, aligned with the scan as the
matrix's cases are) and found from the data (``peak_basis``, ``fitted_basis``), on the
case's scan or on a window of it. Prototype: thin first-order model, rotation 0.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from bias_profiles import (
    Case,
    c10_minimum,
    effective_frequencies,
    load,
    with_spectra,
)
from scipy.optimize import minimize, minimize_scalar

from livessb.physics import lattice as package
from livessb.physics import lattice_columns as columns
from livessb.physics import lattice_peaks

A_STO = 3.905  # the matrix's SrTiO3 [001] lattice constant, Å


def windowed(case: Case, n: int) -> Case:
    """``case`` on its first n × n scan positions (fewer lattice periods)."""
    return {**case, **with_spectra(case["I"][:n, :n], case["step"])}


def lattice_points(case: Case, basis: np.ndarray) -> np.ndarray:
    """(n_g, 2) lattice frequencies of ``basis`` whose trotter holds BF pixels (the
    package's ``physics.lattice.lattice_points``)."""
    return package.lattice_points(basis, case["k_alpha"])


def square_basis(a_A: float) -> np.ndarray:
    """The matrix cases' lattice: square, period ``a_A``, aligned with the scan axes."""
    return np.eye(2) / a_A


def peak_basis(case: Case) -> np.ndarray:
    """A first basis from the data's peaks (the package's ``physics.lattice_peaks.peak_basis``)."""
    return lattice_peaks.peak_basis(case["I"], tuple(case["step"]), band_inv_A=2 * case["k_alpha"])


def fitted_basis(case: Case, basis: np.ndarray, p: dict[str, float]) -> np.ndarray:
    """``basis`` refined by the lattice model's own loss at the parameters ``p``: the
    lattice whose model explains the most (Nelder–Mead over the four components)."""
    def at(v: np.ndarray) -> float:
        b = v.reshape(2, 2)
        return lattice_loss(case, p, lattice_setup(case, lattice_points(case, b)))

    best = minimize(at, basis.ravel(), method="Nelder-Mead",
                    options={"xatol": 1e-6, "fatol": 1e-9 * abs(at(basis.ravel())),
                             "maxiter": 400})
    return np.asarray(best.x).reshape(2, 2)


def lattice_setup(case: Case, g: np.ndarray) -> package.LatticeData:
    """What does not depend on the parameters (``physics.lattice.lattice_data``)."""
    return package.lattice_data(case["I"], g, tuple(case["step"]))


def lattice_loss(case: Case, p: dict[str, float], setup: package.LatticeData) -> float:
    """−(explained energy) of the lattice model with a free object per (g, lobe): the
    package's ``physics.lattice`` columns and solve on the case's geometry."""
    geo = columns.LatticeGeometry(k=case["k"], wavelength=case["lam"],
                                  k_alpha=case["k_alpha"], edge_width=case["px"])
    return package.lattice_solve(
        setup, columns.lattice_columns(geo, setup.g, p, (), pixels="trotter")[0]).loss


def lattice_c10_minimum(case: Case, basis: np.ndarray) -> float:
    """The lattice model's conditional C10 minimum minus the truth."""
    setup = lattice_setup(case, lattice_points(case, basis))
    t = case["truth"]
    best = minimize_scalar(lambda c10: lattice_loss(case, {**t, "C10": c10}, setup),
                           bounds=(t["C10"] - 8, t["C10"] + 8), method="bounded",
                           options={"xatol": 1e-3})
    return float(best.x) - t["C10"]


def found_lattice_c10(case: Case, rounds: int = 1,
                      true_basis: np.ndarray | None = None) -> tuple[float, float, float]:
    """The C10 deviation with the lattice found from the data (``peak_basis``, then
    refined by the loss at the current C10 minimum, ``rounds`` times), and the found
    vectors' largest error against the nearest vectors of the true lattice
    (``true_basis``, else the matrix's square one): relative length and angle (mrad)."""
    t = case["truth"]
    basis = peak_basis(case)
    dc10 = lattice_c10_minimum(case, basis)
    for _ in range(rounds):
        basis = fitted_basis(case, basis, {**t, "C10": t["C10"] + dc10})
        dc10 = lattice_c10_minimum(case, basis)
    true = square_basis(A_STO) if true_basis is None else true_basis
    errors = []
    for v in basis:
        w = np.round(np.linalg.solve(true.T, v)) @ true  # the true lattice's nearest
        errors.append((np.hypot(*v) / np.hypot(*w) - 1,
                       1e3 * np.arctan2(w[0] * v[1] - w[1] * v[0], np.dot(w, v))))
    return dc10, max(abs(e[0]) for e in errors), max(abs(e[1]) for e in errors)


def demo_cases(dose: float, size: int) -> list[tuple[str, Case]]:
    """The nine ``size``² regions of ``scripts/region_coverage.py``'s grid on the demo
    simulation (our simulator: 0.6 Å steps, detector rotated 12°, a defocus gradient; the
    embedded demo at 5·10⁴ e⁻, 0 noise-free), each with its truth at the region's centre."""
    from region_coverage import region_grid

    from livessb.physics.geometry import bright_field_pixels, scan_frame_frequencies
    from livessb.physics.optics import wavelength_A
    from livessb.simulate.demo import DEMO_SETTINGS
    from livessb.simulate.forward import simulate_4dstem

    ds, truth = simulate_4dstem(**{**DEMO_SETTINGS, "dose": dose or None})
    counts = np.asarray(ds.counts, dtype=np.float64)
    lam = wavelength_A(float(DEMO_SETTINGS["voltage_kV"]))
    px = truth.detector_sampling_mrad * 1e-3 / lam
    k_alpha = DEMO_SETTINGS["semiangle_mrad"] * 1e-3 / lam
    bf = bright_field_pixels(counts.shape[2:], tuple(truth.bf_center_px), px, k_alpha + px)
    k = scan_frame_frequencies(bf.k_det, np.radians(DEMO_SETTINGS["rotation_deg"]), False)
    step = np.array([DEMO_SETTINGS["scan_step_A"]] * 2)
    out = []
    for b in region_grid(counts.shape[:2], size, 3):
        I = counts[b[0]:b[1], b[2]:b[3]][:, :, bf.rows, bf.cols]
        t = truth.local_params(b)
        case = {"k": k, "lam": lam, "px": px, "k_alpha": k_alpha, "step": step,
                **with_spectra(I, step), "truth": {n: t[n] for n in ("C10", "C12", "phi12")}}
        out.append((f"demo {b}", case))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", nargs="*", type=Path)
    ap.add_argument("--window", type=int, nargs="*", default=[0],
                    help="fit the first N×N positions (0: the whole scan); several allowed")
    ap.add_argument("--demo", type=float, default=None, metavar="DOSE",
                    help="instead: the demo's nine regions of --window N (default 16) at "
                         "DOSE e⁻ (5e4: the embedded demo; 0: noise-free), lattice given")
    args = ap.parse_args()
    if args.demo is not None:
        size = args.window[0] or 16
        print(f"| demo region ({size}²) | truth C10 | per bin, effective ν | lattice given |"
              "\n|---|---|---|---|")
        for name, case in demo_cases(args.demo, size):
            cells = [c10_minimum(case, *effective_frequencies(case)),
                     lattice_c10_minimum(case, square_basis(A_STO))]
            print(f"| {name} | {case['truth']['C10']:.2f} | "
                  + " | ".join(f"{v:+.2f}" for v in cells) + " |", flush=True)
        return
    print("| case | window (periods) | truth C10 | per bin, effective ν | lattice given |"
          " lattice found | its length / angle error |\n|---|---|---|---|---|---|---|")
    for path in args.cases:
        full = load(path)
        for n in args.window:
            case = windowed(full, n) if n else full
            size = case["I"].shape[0]
            periods = size * case["step"][0] / A_STO
            found, length, angle = found_lattice_c10(case)
            cells = [c10_minimum(case, *effective_frequencies(case)),
                     lattice_c10_minimum(case, square_basis(A_STO)), found]
            print(f"| {path.stem} | {size}² ({periods:.2f}) | {case['truth']['C10']:.2f} | "
                  + " | ".join(f"{v:+.2f}" for v in cells)
                  + f" | {100 * length:.2f} % / {angle:.2f} mrad |", flush=True)


if __name__ == "__main__":
    main()

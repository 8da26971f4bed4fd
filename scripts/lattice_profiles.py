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
from typing import Any

import numpy as np
from bias_profiles import (
    Case,
    c10_minimum,
    effective_frequencies,
    gamma,
    load,
    trotter_lobes,
    with_spectra,
)
from scipy.linalg import solve
from scipy.optimize import minimize, minimize_scalar

from livessb.physics.apodisation import hann

A_STO = 3.905  # the matrix's SrTiO3 [001] lattice constant, Å


def windowed(case: Case, n: int) -> Case:
    """``case`` on its first n × n scan positions (fewer lattice periods)."""
    return {**case, **with_spectra(case["I"][:n, :n], case["step"])}


def lattice_points(case: Case, basis: np.ndarray) -> np.ndarray:
    """(n_g, 2) lattice frequencies h·b₁ + k·b₂ (1/Å; ``basis`` rows b₁, b₂) whose trotter
    holds BF pixels: 0 < |g| < 2k_α."""
    reach = int(np.ceil(2 * case["k_alpha"] / min(np.hypot(*basis[0]), np.hypot(*basis[1]))
                        * 2))
    h = np.arange(-reach, reach + 1)
    hk = np.stack(np.meshgrid(h, h, indexing="ij"), -1).reshape(-1, 2)
    g = hk @ basis
    norm = np.hypot(g[:, 0], g[:, 1])
    return g[(norm > 0) & (norm < 2 * case["k_alpha"])]


def square_basis(a_A: float) -> np.ndarray:
    """The matrix cases' lattice: square, period ``a_A``, aligned with the scan axes."""
    return np.eye(2) / a_A


def peak_basis(case: Case, oversample: int = 4, peaks: int = 24) -> np.ndarray:
    """A first lattice basis from the data: the ``peaks`` strongest local maxima of the
    BF-summed power spectrum of the Hann-apodised counts (``oversample``× zero-padded) are
    lattice points, and so are their differences; the shortest two non-collinear of those
    span the lattice (a crystal's weak reflections, SrTiO3's (100) beside (110) and (200),
    still enter through the differences of strong ones)."""
    I = case["I"] - case["I"].mean(axis=(0, 1))
    n_r, n_c = I.shape[:2]
    h = np.outer(hann(n_r), hann(n_c))
    shape = (oversample * n_r, oversample * n_c)
    E = np.sum(np.abs(np.fft.fft2(I * h[:, :, None], s=shape, axes=(0, 1))) ** 2, axis=2)
    f_r = np.fft.fftfreq(shape[0], case["step"][0])
    f_c = np.fft.fftfreq(shape[1], case["step"][1])
    peak = E >= np.max([np.roll(E, (dr, dc), (0, 1)) for dr in (-1, 0, 1)
                        for dc in (-1, 0, 1)], axis=0)
    peak[:oversample, :oversample] = False  # the DC's own lobe
    rows, cols = np.nonzero(peak)
    order = np.argsort(-E[rows, cols])[:peaks]
    P = np.stack([f_r[rows[order]], f_c[cols[order]]], 1)
    D = np.concatenate([P, (P[:, None, :] - P[None, :, :]).reshape(-1, 2)])
    length = np.hypot(D[:, 0], D[:, 1])
    resolution = 1.0 / (oversample * min(n_r * case["step"][0], n_c * case["step"][1]))
    D, length = D[length > 2 * resolution], length[length > 2 * resolution]
    D = D[np.argsort(length)]
    b1 = D[0]
    b2 = next(v for v in D[1:]
              if abs(b1[0] * v[1] - b1[1] * v[0]) > 0.3 * np.hypot(*b1) * np.hypot(*v))
    return np.array([b1, b2])


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


def _kernel(case: Case, x: np.ndarray) -> np.ndarray:
    """W(x) for (..., 2) frequencies x: the window's positions summed per axis."""
    out = np.ones(x.shape[:-1], dtype=complex)
    for axis, n in enumerate(case["I"].shape[:2]):
        r = np.arange(n)
        out = out * np.exp(2j * np.pi * x[..., axis, None] * r * case["step"][axis]).sum(-1)
    return out


def lattice_setup(case: Case, g: np.ndarray) -> dict[str, Any]:
    """What does not depend on the parameters: each g's transform of the mean-removed
    counts (n_g, B) and the window's Gram matrix K (n_g, n_g)."""
    I = case["I"] - case["I"].mean(axis=(0, 1))
    n_r, n_c = I.shape[:2]
    e_r = np.exp(-2j * np.pi * g[:, 0, None] * np.arange(n_r) * case["step"][0])
    e_c = np.exp(-2j * np.pi * g[:, 1, None] * np.arange(n_c) * case["step"][1])
    N = n_r * n_c
    H = N * np.einsum("gr,rcb,gc->gb", e_r, I, e_c)
    K = N * _kernel(case, g[None, :, :] - g[:, None, :]) - np.outer(
        np.conj(_kernel(case, g)), _kernel(case, g))
    return {"g": g, "H": H, "K": K}


def lattice_loss(case: Case, p: dict[str, float], setup: dict[str, Any]) -> float:
    """−(explained energy) of the lattice model with a free object per (g, lobe)."""
    g, H, K = setup["g"], setup["H"], setup["K"]
    gr, gc = g[None, :, 0], g[None, :, 1]
    gam = gamma(case, p, gr, gc)  # (B, n_g)
    in_minus, support = trotter_lobes(case, gr, gc)
    cols = [np.where(in_minus & support, gam, 0), np.where(~in_minus & support, gam, 0)]
    A = np.concatenate(cols, axis=1)  # (B, 2 n_g): the k−g lobes, then the k+g lobes
    rhs = np.einsum("bj,jb->j", np.conj(A), np.concatenate([H, H]))
    M = np.tile(K, (2, 2)) * (np.conj(A).T @ A)
    used = np.real(np.diag(M)) > 1e-12 * np.real(np.diag(M)).max()
    x = solve(M[np.ix_(used, used)], rhs[used], assume_a="her")
    return -float(np.real(np.vdot(rhs[used], x)))


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

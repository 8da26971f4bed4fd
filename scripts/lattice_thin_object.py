"""The lattice model with the thin object's every term (docs/bias-matrix.md §14).

``scripts/lattice_profiles.py`` gives each lattice frequency g a free object per trotter
lobe (the first-order terms). A thin object's intensity at g, on any BF pixel k, is

    I_g(k) = Σ_g′ T(g′) T*(g′ − g) P(k − g′) P*(k − g′ + g),

so the first-order lobes are the terms g′ = g and g′ = 0, and a strong object adds every
other pair of beams whose discs cover k (the second-order terms). Here T (one complex
number per lattice point and the zero beam) is fitted at each C10 by L-BFGS (PyTorch, CPU;
warm-started from the previous C10), with the window's kernel W and the aliases as in
``lattice_profiles`` (the loss in its H/K form), over every BF pixel:

    python scripts/lattice_thin_object.py 0 ~/.cache/livessb/bias-matrix/dose1e10/sto1_C10+40.npz
    python scripts/lattice_thin_object.py 18 CASES...   # the first 18² positions

prints the conditional C10 minimum minus the truth of the first-order lattice model and of
this one (~3 min a case on two cores). Needs torch (not a livessb dependency:
``pip install torch==2.13.0``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from bias_profiles import Case, _probe, load
from lattice_profiles import (
    A_STO,
    lattice_c10_minimum,
    lattice_points,
    lattice_setup,
    square_basis,
    windowed,
)
from scipy.optimize import minimize_scalar

from livessb.physics.lattice import LatticeData


def beam_terms(g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The beams (the zero beam first, then ``g``) and the terms (i, j, f): T(beam_i)
    T*(beam_j) at the frequency beam_i − beam_j = g_f, for every such pair in the table."""
    beams = np.concatenate([np.zeros((1, 2)), g])

    def key(v: np.ndarray) -> tuple[int, ...]:
        return tuple(np.round(v * 1e6).astype(int))

    at = {key(v): f for f, v in enumerate(g)}
    terms = [(i, j, at[key(beams[i] - beams[j])]) for i in range(len(beams))
             for j in range(len(beams)) if i != j and key(beams[i] - beams[j]) in at]
    return beams, np.array(terms)


def thin_object_loss(case: Case, p: dict[str, float], beams: np.ndarray, terms: np.ndarray,
                     setup: LatticeData) -> Callable[[Any], Any]:
    """The residual energy (less a constant) as a torch function of T at the parameters p."""
    import torch

    kr, kc = case["k"][:, :1], case["k"][:, 1:]
    P = _probe(kr - beams[None, :, 0], kc - beams[None, :, 1], case, p)  # (B, beams)
    i, j, f = terms.T
    pattern = P[:, i] * np.conj(P[:, j])
    lit = np.abs(pattern).max(axis=0) > 0  # the pairs of discs that meet on a BF pixel
    Q = torch.from_numpy(pattern[:, lit])
    ti, tj, tf = (torch.from_numpy(np.ascontiguousarray(a[lit])) for a in (i, j, f))
    H, K = torch.from_numpy(setup.H), torch.from_numpy(setup.K)

    def loss(T: Any) -> Any:
        coeff = T[ti] * T[tj].conj()
        c = torch.zeros((H.shape[0], Q.shape[0]), dtype=torch.complex128).index_add(
            0, tf, (Q * coeff[None, :]).T)  # (n_g, B): each lattice frequency's signal
        return (-2 * (c.conj() * H).sum().real
                + torch.einsum("gb,gh,hb->", c.conj(), K, c).real)
    return loss


def fitted_objects(loss: Callable[[Any], Any], start: np.ndarray,
                   iterations: int) -> tuple[float, np.ndarray]:
    """(loss, T) at the minimum L-BFGS reaches from ``start``."""
    import torch

    x = torch.view_as_real(torch.from_numpy(start)).clone().requires_grad_(True)
    opt = torch.optim.LBFGS([x], lr=1, max_iter=iterations, tolerance_grad=1e-12,
                            tolerance_change=1e-15, history_size=50,
                            line_search_fn="strong_wolfe")

    def closure() -> Any:
        opt.zero_grad()
        value = loss(torch.view_as_complex(x))
        value.backward()
        return value

    opt.step(closure)
    with torch.no_grad():
        T = torch.view_as_complex(x)
        return float(loss(T)), T.detach().numpy().copy()


def thin_object_c10_minimum(case: Case, basis: np.ndarray) -> float:
    """The conditional C10 minimum minus the truth, T refitted at each C10."""
    g = lattice_points(case, basis)
    beams, terms = beam_terms(g)
    setup = lattice_setup(case, g)
    t = case["truth"]
    start = np.full(len(beams), 1e-3 * np.sqrt(case["I"].mean()), dtype=complex)
    start[0] = np.sqrt(case["I"].mean())  # the zero beam carries the mean intensity
    state = {"T": start, "iterations": 500}

    def at(c10: float) -> float:
        value, state["T"] = fitted_objects(
            thin_object_loss(case, {**t, "C10": c10}, beams, terms, setup), state["T"],
            int(state["iterations"]))
        state["iterations"] = 300  # warm-started from the previous C10
        return value

    best = minimize_scalar(at, bounds=(t["C10"] - 4, t["C10"] + 4), method="bounded",
                           options={"xatol": 2e-3})
    return float(best.x) - t["C10"]


def main() -> None:
    import torch

    torch.set_num_threads(2)
    n = int(sys.argv[1])
    for path in map(Path, sys.argv[2:]):
        full = load(path)
        case = windowed(full, n) if n else full
        t0 = time.perf_counter()
        first = lattice_c10_minimum(case, square_basis(A_STO))
        thin = thin_object_c10_minimum(case, square_basis(A_STO))
        print(f"| {path.stem} | {case['I'].shape[0]}² | {first:+.2f} | {thin:+.2f} | "
              f"{time.perf_counter() - t0:.0f} s |", flush=True)


if __name__ == "__main__":
    main()

"""Thin or thick, chosen again in crystal mode (fit.lattice).

The per-bin fit chooses between the thin and the thick model (fit.model_choice) on a
model that reads each detector pixel at its centre. On a coarse camera, whose pixels
integrate the intensity over an area where it varies, that model misses the pixels'
blur, and depth and tilt absorb part of it: on the abTEM matrix's 2 × 2- and 4 × 4-binned
one-cell crystals (3–6 px across the BF radius) the per-bin fit kept depths of 15–24 Å
and tilts up to 15 mrad for a 3.9 Å crystal (docs/bias-matrix.md §18). Crystal mode
models each pixel's area, so it asks the question again on its own loss: the lattice
model's Newton with depth and tilt at 0 (the thin model) against the one at the per-bin
fit's thick values (free where the per-bin fit determined them), and the same
likelihood-ratio test as the per-bin choice's (a): the thick model is kept when the
residual it removes, over the noise of the thick fit's lattice residual,
T = ΔR / (κσ²) > χ²₃(p = 0.001) = 16.27. Where it is not, the thin model is the fit
crystal mode goes on with (its errors, the thin object's terms).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .lattice_errors import noise_errors
from .lattice_problem import LatticeProblem, NewtonOutcome, lattice_newton
from .model_choice import CHI2_3_P001, THICK_ONLY


@dataclass(frozen=True)
class LatticeChoice:
    """The thin-or-thick choice on the lattice model and the numbers behind it."""

    kept: str  # "thin" | "thick"
    reason: str
    loss_thin: float
    loss_thick: float
    statistic: float  # T = ΔR / (κσ²)
    threshold: float
    thick_params: dict[str, float]  # depth and tilt where the thick model was fitted

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def asked_again(kept: str | None, box: Mapping[str, tuple[float, float]]) -> bool:
    """Whether the choice is made again: the per-bin fit chose, and kept the thick model
    (depth and tilt in the search box; a depth the caller holds stays as it is)."""
    return kept == "thick" and all(n in box for n in THICK_ONLY)


def lattice_model_choice(problem: LatticeProblem, thick: NewtonOutcome, free: Sequence[str],
                         box: Mapping[str, tuple[float, float]]
                         ) -> tuple[NewtonOutcome, list[str], LatticeChoice]:
    """(the kept fit, its free names, the choice) between ``thick`` (the lattice Newton
    from the per-bin thick fit over ``free``) and the thin model refined from it."""
    thin_free = [n for n in free if n not in THICK_ONLY]
    thin = lattice_newton(problem, {**thick.params, **{n: 0.0 for n in THICK_ONLY}},
                          thin_free, box)
    _, sigma2, kappa = noise_errors(problem, thick, free, box)
    gain = max(thin.loss - thick.loss, 0.0)
    scale = kappa * sigma2
    statistic = gain / scale if scale > 0 and math.isfinite(scale) else math.inf
    held = {n: float(thick.params.get(n, 0.0)) for n in THICK_ONLY}
    if statistic > CHI2_3_P001:
        return thick, list(free), LatticeChoice(
            "thick", f"the thick model removes a significant part of the lattice model's "
            f"residual (T = {statistic:.3g} > {CHI2_3_P001}, χ²₃ at p = 0.001)",
            thin.loss, thick.loss, statistic, CHI2_3_P001, held)
    return thin, thin_free, LatticeChoice(
        "thin", f"the thick model (depth {held['depth']:.3g} Å, tilt "
        f"({held['tilt_row_mrad']:.3g}, {held['tilt_col_mrad']:.3g}) mrad) the per-bin fit "
        f"kept does not improve the lattice model significantly (T = {statistic:.3g} ≤ "
        f"{CHI2_3_P001}, χ²₃ at p = 0.001): depth and tilt are 0",
        thin.loss, thick.loss, statistic, CHI2_3_P001, held)

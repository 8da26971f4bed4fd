"""Thin or thick model, undetermined parameters and box-edge warnings of a fit.

**Model choice.** The thin model (depth 0, tilt 0) is nested in the thick one (three
more parameters). The thick model is kept only when both hold:

(a) *significant*: T = ΔR / (κ σ²) > χ²₃(p = 0.001) = 16.27, ΔR = (L_thin - L_thick)·E
    the residual it removes, σ² and κ the thick fit's noise level and profile factor
    (fit.errors): a likelihood-ratio test at p = 0.001;
(b) *explanatory*: ΔR ≥ ½ (X - 2 sd), X = R_thin - σ²_floor·dof_thin what the thin
    model leaves unexplained beyond the noise floor, sd = σ²·√(2 n_obs) the noise
    scatter of R itself (R/σ² is χ² with n_obs terms): the thick model removes at least
    half of a misfit that stands out from the noise. The floor is the Poisson level
    when the counts are consistent with it (the thick residual within 25 % of it),
    else the thick fit's own residual level, which leaves (a) alone.

(b) is there because the data may break both models: a defocus that changes across
the field (the demo: 0.8 Å per scan column) is not a depth spread, yet a depth of
≈ 73 Å removes a significant (T ≈ 2600) but small part (≈ 5 %) of the thin misfit; a
real 150 Å slab removes almost all of it (≈ 97 %). A map (fit_map) resolves the
former. When the thin model is kept, depth and tilt are 0, their errors 0, and they
are listed as undetermined (held by the model choice).

**Undetermined.** A free parameter is undetermined when its error exceeds
``ERROR_BOX_FRACTION`` of its box width, or when it is inseparable: tilt enters only
through depth (undetermined while depth < 2 errors), an angle φ_nm only through its
C_nm (undetermined while C_nm < 2 errors).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..params import BY_NAME, NON_NEGATIVE
from .errors import NoiseLevel

CHI2_3_P001 = 16.266  # χ² quantile, 3 degrees of freedom, p = 0.001
EXPLAINED_MIN = 0.5  # (b): fraction of the thin model's excess misfit
POISSON_CONSISTENT = 1.25  # σ²_residual / σ²_Poisson up to which the floor is Poisson
ERROR_BOX_FRACTION = 0.1  # an error beyond this fraction of its box: undetermined
THICK_ONLY: tuple[str, ...] = ("tilt_row_mrad", "tilt_col_mrad", "depth")
TILTS: tuple[str, ...] = ("tilt_row_mrad", "tilt_col_mrad")


@dataclass(frozen=True)
class ModelChoice:
    """Which model a fit kept and the numbers behind the rule (module docstring)."""

    kept: str  # "thin" | "thick"
    reason: str
    loss_thin: float
    loss_thick: float
    statistic: float  # T = ΔR / (κ σ²)
    threshold: float
    explained_fraction: float  # ΔR over the thin model's excess misfit (≤ 1)
    floor: str  # "poisson" | "residual"
    criterion: str = ("thick kept iff ΔR/(κσ²) > χ²₃(p=0.001) and ΔR ≥ ½ of the thin "
                      "model's misfit beyond the noise floor")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def choose_model(
    loss_thin: float, loss_thick: float, energy: float, noise: NoiseLevel, n_thin: int,
) -> ModelChoice:
    """Apply (a) and (b) with the thick fit's ``noise`` and ``n_thin`` thin parameters."""
    delta = max(loss_thin - loss_thick, 0.0) * energy
    # Apodised spectra share noise between neighbouring bins: the statistic's scale
    # and the residual's scatter grow by their design factor (physics.apodisation).
    statistic = (delta / (noise.kappa * noise.sigma2 * noise.design) if noise.sigma2 > 0
                 else float("inf"))
    poisson_ok = 0 < noise.sigma2_poisson and noise.excess <= POISSON_CONSISTENT
    floor_s2 = min(noise.sigma2_poisson, noise.sigma2) if poisson_ok else noise.sigma2
    dof_thin = noise.n_observations - noise.n_object - n_thin
    scatter = 2.0 * noise.sigma2 * (2.0 * noise.n_observations * noise.design) ** 0.5
    excess = loss_thin * energy - floor_s2 * dof_thin - scatter
    explained = min(delta / excess, 1.0) if excess > 0 else 1.0
    significant = statistic > CHI2_3_P001
    explanatory = explained >= EXPLAINED_MIN
    if significant and explanatory:
        kept, reason = "thick", (
            f"the thick model removes a significant (T = {statistic:.3g} > {CHI2_3_P001}) "
            f"and explanatory ({explained:.0%} ≥ {EXPLAINED_MIN:.0%}) part of the misfit")
    elif not significant:
        kept, reason = "thin", (
            f"the thick model's improvement is not significant (T = {statistic:.3g} ≤ "
            f"{CHI2_3_P001}, χ²₃ at p = 0.001)")
    else:
        kept, reason = "thin", (
            f"the thick model's improvement is significant (T = {statistic:.3g}) but explains "
            f"only {explained:.0%} of the thin model's misfit beyond the noise (< "
            f"{EXPLAINED_MIN:.0%}): the misfit is something else (e.g. parameters varying "
            "across the field: try a map, Session.fit_map or livessb map)")
    return ModelChoice(kept=kept, reason=reason, loss_thin=float(loss_thin),
                       loss_thick=float(loss_thick), statistic=float(statistic),
                       threshold=CHI2_3_P001, explained_fraction=float(explained),
                       floor="poisson" if poisson_ok else "residual")


def undetermined(
    params: Mapping[str, float], errors: Mapping[str, float],
    box: Mapping[str, tuple[float, float]], free: Sequence[str], held_by_model: Sequence[str] = (),
) -> list[str]:
    """Names the data do not determine, in ``params`` order (module docstring)."""
    out = set(held_by_model)
    for name in free:
        lo, hi = box[name]
        if errors[name] > ERROR_BOX_FRACTION * (hi - lo):
            out.add(name)
    if "depth" in free and params["depth"] < 2.0 * errors["depth"]:
        out.update(t for t in TILTS if t in free)
    for name in free:
        if BY_NAME[name].period is not None:
            mag = "C" + name[3:]
            if mag in params and (mag in out or abs(params[mag]) < 2.0 * errors.get(mag, 0.0)):
                out.add(name)
    return [n for n in params if n in out]


def edge_warnings(
    params: Mapping[str, float], errors: Mapping[str, float],
    box: Mapping[str, tuple[float, float]], on_box_edge: Sequence[str],
) -> list[str]:
    """A warning per value on its box edge, or whose ±2σ interval leaves the box."""
    out = []
    for name in params:
        if name not in box or BY_NAME[name].period is not None:
            continue
        lo, hi = box[name]
        v, e = params[name], errors.get(name, 0.0)
        unit = BY_NAME[name].unit
        if name in on_box_edge:
            out.append(f"{name} = {v:.4g} {unit} sits on its box edge [{lo:g}, {hi:g}]: the "
                       "fit may want more room; widen the box (box={...})")
        elif e > 0 and ((v - 2 * e < lo and not (name in NON_NEGATIVE and lo == 0))
                        or v + 2 * e > hi):
            out.append(f"{name} = {v:.4g} ± {e:.2g} {unit}: the ±2σ interval leaves the box "
                       f"[{lo:g}, {hi:g}]")
    return out

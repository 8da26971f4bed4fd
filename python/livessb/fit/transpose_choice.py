"""Which detector orientation where the COM curl cannot tell (issue 20).

``estimate_rotation`` picks the transpose T from the curl of the COM field; where a half
of the scan prefers the other one (``transpose_undecided``) both orientations are fitted
(fit.full_field). A transposed detector mirrors k against the scan frame, and in the
trotter phases k·ν becomes k·Mν (M a reflection): a defocus reads as an astigmatism of
the same size. So the two fits land far apart (C10 -80, C12 15 Å against C10 +13,
C12 78 Å) and what separates their losses is what breaks that near-symmetry: the
aperture edge, the trotters' shapes, the object's spectrum. On a small scan that can be
less than the counting noise, and the lower loss is then a coin toss.

So the losses decide only where their difference stands out from the noise:

    z = (L_other - L_curl) / √(v_curl + v_other),  v = var(1 - L) = 2κσ²·design·(1 - L)/E

(``fit.uncertainty.explained_variance``: each orientation's own noise level, the two
taken as independent; 0.8-1.5x the scatter of the difference over ten noise draws of a
16²-32² crystal scan). Where |z| > ``Z_MIN`` (χ²₁ at p = 0.001, the
level of the fit's other tests) the lower loss wins. Otherwise the curl's whole-scan
choice stays and the orientation is not determined: the record says so, the warnings
name the other orientation's fit, and every parameter on which the two fits differ by
more than two errors is listed as undetermined. docs/uncertainty.md "The detector
orientation" has the measurements.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..params import on_circle
from ..results import FitResult

Z_MIN = math.sqrt(10.83)  # χ²₁ at p = 0.001
ORIENTATION_NOT_DETERMINED = "the detector orientation is not determined"  # its warning's start


@dataclass(frozen=True)
class TransposeChoice:
    """The orientation kept (an index into the candidates, 0 the curl's) and why."""

    kept: int
    chosen_by: str  # "curl" | "loss"
    z: float  # (L_other - L_curl) / its noise; nan with one candidate
    determined: bool


def choose_transpose(losses: Sequence[float], variances: Sequence[float]) -> TransposeChoice:
    """``losses[0]``, ``variances[0]``: the curl's orientation; ``[1]``, if any, the other's
    (``variances``: each one's ``explained_variance``)."""
    if len(losses) == 1:
        return TransposeChoice(kept=0, chosen_by="curl", z=math.nan, determined=True)
    spread = math.sqrt(variances[0] + variances[1])
    z = (losses[1] - losses[0]) / spread if spread > 0 else math.copysign(
        math.inf, losses[1] - losses[0])
    if abs(z) > Z_MIN:
        return TransposeChoice(kept=0 if z > 0 else 1, chosen_by="loss", z=z, determined=True)
    return TransposeChoice(kept=0, chosen_by="curl", z=z, determined=False)


def orientation_notes(
    params: Mapping[str, float], errors: Mapping[str, float], record: Mapping[str, Any],
) -> tuple[list[str], str | None]:
    """(names to list as undetermined, a warning) where a full-field fit's ``record`` (its
    provenance) says the orientation is not determined; ([], None) elsewhere."""
    if record.get("transpose_determined", True):
        return [], None
    other = next(c for c in record["transpose_candidates"] if not c["chosen"])
    differ = [n for n, v in params.items() if errors.get(n, 0.0) > 0 and n in other["params"]
              and abs(on_circle(n, v - other["params"][n])) > 2.0 * errors[n]]
    shown = ", ".join(f"{n} {other['params'][n]:.4g}" for n in ("C10", "C12", "phi12")
                      if n in other["params"])
    warning = (
        f"{ORIENTATION_NOT_DETERMINED}: the COM curl prefers transpose="
        f"{not other['transpose']} but a half of the scan disagrees, and the fit with "
        f"transpose={other['transpose']} (rotation {other['rotation_deg']:.1f}°: {shown}) "
        f"explains the data as well (loss {other['loss']:.5g}, z = "
        f"{record['transpose_z']:.2f} within ±{Z_MIN:.2f}); {', '.join(differ) or 'nothing'} "
        "depend on it and are listed as undetermined. If you know the detector's "
        "orientation, hold it (fit(transpose=...), CLI --transpose yes/no); else fit a larger "
        "scan of the same setup, save its calibration and fit this one as a region at its "
        "rotation (Python: Session(ds, calibration=path, force=True, preprocessing="
        "livessb.Preprocessing()), then fit_region over the whole scan; CLI: --calibration "
        "path --force --descan plane --region 0 ROWS 0 COLS)")
    return differ, warning


def inherited_orientation(full_fit: FitResult | None) -> dict[str, Any]:
    """The full field's orientation verdict for a fit at its rotation (a region, a map
    tile, a refinement): where it is not determined, the keys ``orientation_notes`` reads,
    so that those fits say so too; {} elsewhere."""
    record = {} if full_fit is None else full_fit.provenance
    if record.get("transpose_determined", True):
        return {}
    return {k: record[k] for k in ("transpose_determined", "transpose_z",
                                   "transpose_candidates")}

"""Did the Hann window change the fit? A Hausman test between a ``scan_window="hann"`` fit
and the unapodised fit Newton-refined from it (docs/bias-matrix.md §10).

Apodisation removes the leakage between the Bragg peaks of a window of few lattice
periods (§6, §9) at the price of noise (errors ×1.9 on a 2-D window). Where there is no
leakage to remove, both fits estimate the same parameters without bias and the
unapodised one is the more precise, so their difference has the variance σ_h² − σ_n² per
parameter (Hausman 1978: the efficient estimate is uncorrelated with its difference from
a consistent one). Leakage biases only the unapodised fit: a difference beyond that noise
measures it. The statistical errors (the larger of noise and misfit, without the
systematic part, which the bands' disagreement adds) enter; C12 is compared as its
vector (C12 cos 2φ12, C12 sin 2φ12), since φ12 is undefined where C12 vanishes.

The verdict is family-wise over the compared quantities (Bonferroni): ``leakage`` at
p < SIGNIFICANCE (0.1, a pre-test's level) says the window mattered (keep "hann").
Without it, the fit with the smaller reported errors is the better one: the unapodised
one's noise errors are about half, but where its frequency bands disagree (aliasing,
leakage too weak for the test) its systematic part can make them the larger; "none" is
advised only where its errors are the smaller on C10 and C12.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..results import FitResult
from .fixed import FreeView
from .joint import newton_fit
from .search import Box
from .uncertainty import assess, sub_box, with_assessment

if TYPE_CHECKING:
    from .model import ThickSampleModel

# A pre-test: a leakage it misses costs a bias the unapodised errors do not cover, a false
# alarm only the Hann's noise, so its level is high. On the bias matrix (§10, with
# alias_pixels="excluded" at 2·10⁵ e⁻) the windows advised at 0.01 covered C10's truth in
# 22 of 26 cases, at 0.1 in 24, 'hann' everywhere in 25.
SIGNIFICANCE = 0.1
# σ_h² − σ_n² where the apodised error is not the larger (a noisy error estimate): the
# difference's variance is then taken as this fraction of σ_h², never 0.
MIN_VARIANCE_FRACTION = 0.25
SHOWN = {"C12_cos": "C12·cos 2φ12", "C12_sin": "C12·sin 2φ12"}  # the compared C12 vector


@dataclass(frozen=True)
class WindowCheck:
    """The two fits' difference per compared quantity, in units of its noise, and each
    fit's reported (total) errors."""

    difference: dict[str, float]  # unapodised − apodised
    z: dict[str, float]
    p_value: float  # family-wise (Bonferroni)
    unapodised: dict[str, float]  # the refined unapodised fit's parameters
    errors_apodised: dict[str, float]  # each fit's reported errors (systematic part too)
    errors_unapodised: dict[str, float]

    @property
    def leakage(self) -> bool:
        return self.p_value < SIGNIFICANCE

    @property
    def recommended(self) -> str:
        """"hann" where it removed a bias or reports the smaller errors (C10 and C12),
        else "none"."""
        if self.leakage:
            return "hann"
        smaller = all(self.errors_unapodised[n] < self.errors_apodised[n]
                      for n in ("C10", "C12") if n in self.errors_apodised)
        return "none" if smaller else "hann"

    def advice(self, adopted: bool = False) -> str:
        """What the check saw and which window to keep (``adopted``: the "auto" window
        reports the unapodised fit)."""
        key = max(self.z, key=lambda k: abs(self.z[k]))
        worst = SHOWN.get(key, key)
        if self.leakage:
            return (f"scan_window='hann' moved {worst} by {self.z[key]:+.1f} of its noise "
                    f"(p = {self.p_value:.2g}): the window's leakage biases the unapodised "
                    "fit here; keep 'hann'")
        ea, eu = self.errors_apodised.get("C10"), self.errors_unapodised.get("C10")
        errors = ("" if ea is None or eu is None
                  else f" (C10 ±{eu:.3g} Å unapodised, ±{ea:.3g} Å with 'hann')")
        same = (f"scan_window='hann' changed no parameter beyond its noise (largest: {worst} "
                f"{self.z[key]:+.1f}, p = {self.p_value:.2g})")
        if self.recommended == "none":
            then = ("it is the one reported (scan_window='auto')" if adopted
                    else "scan_window='none' suits these data")
            return f"{same}; the unapodised fit has the smaller errors here{errors}: {then}"
        return f"{same}, and 'none' would not report the smaller errors{errors}; keep 'hann'"

    def to_dict(self) -> dict[str, Any]:
        return {"difference": dict(self.difference), "z": dict(self.z),
                "p_value": self.p_value, "leakage": self.leakage,
                "significance": SIGNIFICANCE, "recommended": self.recommended,
                "unapodised": dict(self.unapodised),
                "errors_apodised": dict(self.errors_apodised),
                "errors_unapodised": dict(self.errors_unapodised), "advice": self.advice()}


def tiles_summary(fits: Sequence[FitResult]) -> dict[str, int] | None:
    """How the window checks of a map's tiles came out (None where none was checked):
    tiles checked, with leakage, advised "none", reporting the unapodised fit ("auto")."""
    checks = [f.provenance.get("window_check") for f in fits]
    done = [c for c in checks if isinstance(c, Mapping)]
    if not done:
        return None
    return {"tiles": len(fits), "checked": len(done),
            "leakage": sum(bool(c.get("leakage")) for c in done),
            "recommended_none": sum(c.get("recommended") == "none" for c in done),
            "reported_none": sum(c.get("reported") == "none" for c in done)}


def statistical_errors(components: Mapping[str, Any]) -> dict[str, float]:
    """Per free parameter the larger of the noise and the misfit error (``errors_components``
    of a fit's provenance, or an Assessment's)."""
    noise = components.get("noise", {})
    misfit = components.get("misfit", {})
    return {n: max(float(e), float(misfit.get(n, 0.0))) for n, e in noise.items()}


def compared_quantities(params: Mapping[str, float],
                        errors: Mapping[str, float]) -> dict[str, tuple[float, float]]:
    """(value, error) of C10 and of the C12 vector's two components, where free."""
    out: dict[str, tuple[float, float]] = {}
    if errors.get("C10", 0.0) > 0:
        out["C10"] = (params["C10"], errors["C10"])
    if errors.get("C12", 0.0) > 0 and errors.get("phi12", 0.0) > 0:
        c12, phi = params["C12"], params["phi12"]
        s_c, s_p = errors["C12"], errors["phi12"]
        cos2, sin2 = math.cos(2 * phi), math.sin(2 * phi)
        out["C12_cos"] = (c12 * cos2, math.hypot(cos2 * s_c, 2 * c12 * sin2 * s_p))
        out["C12_sin"] = (c12 * sin2, math.hypot(sin2 * s_c, 2 * c12 * cos2 * s_p))
    return out


def compare_windows(apodised: Mapping[str, float], apodised_errors: Mapping[str, float],
                    unapodised: Mapping[str, float], unapodised_errors: Mapping[str, float],
                    reported: tuple[Mapping[str, float], Mapping[str, float]]) -> WindowCheck:
    """The Hausman comparison of the two fits (parameters and statistical errors);
    ``reported``: the apodised and the unapodised fit's reported (total) errors."""
    a = compared_quantities(apodised, apodised_errors)
    u = compared_quantities(unapodised, unapodised_errors)
    names = [n for n in a if n in u]
    if not names:
        raise ValueError("the window check needs C10 or C12 free in both fits")
    diff, z = {}, {}
    for n in names:
        (va, sa), (vu, su) = a[n], u[n]
        var = max(sa * sa - su * su, MIN_VARIANCE_FRACTION * sa * sa)
        diff[n] = vu - va
        z[n] = diff[n] / math.sqrt(var)
    p_one = min(math.erfc(abs(v) / math.sqrt(2.0)) for v in z.values())
    shown = ("C10", "C12", "phi12")
    return WindowCheck(
        difference=diff, z=z, p_value=min(1.0, p_one * len(names)),
        unapodised=dict(unapodised),
        errors_apodised={n: float(reported[0][n]) for n in shown if reported[0].get(n)},
        errors_unapodised={n: float(reported[1][n]) for n in shown if reported[1].get(n)})


def with_window_check(result: FitResult, unapodised: ThickSampleModel, box: Box,
                      held: Mapping[str, float], dataset: Any, adopt: bool = False) -> FitResult:
    """``result``, a fit on apodised spectra, with ``provenance["window_check"]``: the fit
    Newton-refined from it on ``unapodised`` (the same window's unapodised spectra, at
    the same rotation; the kept thin/thick model's free parameters of ``box``, the rest
    held as fitted) and compared. Where "none" is recommended, ``adopt`` (the "auto"
    window) returns the unapodised fit with its own errors instead; without ``adopt`` the
    advice joins the warnings."""
    t0 = time.perf_counter()
    free = tuple(n for n in box.names if result.errors.get(n, 0.0) > 0)
    if not compared_quantities(result.params, {n: 1.0 for n in free}):
        return result  # C10 and C12 held (fixed=...): nothing the window could move
    kept_box = sub_box(box, free)
    fixed = {**held, **{n: result.params[n] for n in box.names if n not in free}}
    view = FreeView(unapodised, kept_box, fixed)
    fit = newton_fit(view, result.params, kept_box, branch="unapodised")
    checked = assess(view, kept_box, fit.params, fit.loss, dataset, fit.on_box_edge,
                     hessian=fit.hessian, choose=False)
    check = compare_windows(
        result.params, statistical_errors(result.provenance.get("errors_components", {})),
        checked.params, statistical_errors({"noise": checked.errors_noise,
                                            "misfit": checked.errors_misfit}),
        (result.errors, checked.errors))
    adopted = adopt and check.recommended == "none"
    record = {**check.to_dict(), "reported": "none" if adopted else "hann",
              "advice": check.advice(adopted)}
    warnings = list(result.provenance.get("warnings", []))
    timings = dict(result.timings)  # (with_assessment would count the check's errors twice)
    if adopted:  # the unapodised fit, its errors and warnings; the thin/thick record kept
        kept = result.provenance.get("model_choice")
        result = with_assessment(replace(result, newton=result.newton + fit.newton), checked)
        result.provenance["model_choice"] = kept
        warnings = list(result.provenance.get("warnings", []))
    elif check.recommended == "none":
        warnings.append(check.advice())
    spent = time.perf_counter() - t0
    timings["window_check_s"] = spent
    if "total_s" in timings:
        timings["total_s"] += spent
    return replace(result, timings=timings, provenance={
        **result.provenance, "window_check": record, "warnings": warnings})

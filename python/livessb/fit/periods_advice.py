"""Advice on a per-bin region fit of a small crystal window: crystal mode.

The per-bin model reads each spectrum bin at one frequency; a crystal whose lattice does
not fit the window leaks between the bins, and on windows of few lattice periods that
biases C10 by several percent in a way no estimate of the per-bin model disagrees about,
so its errors cannot grow to cover it (noise-free on the demo's crystal: +2.0 Å at 2.5
periods, +1.4 at 4.3, within 0.5 from 4.9 on; its 16² regions at 5·10⁴ e⁻ cover their
truth in 4 of 9: docs/bias-matrix.md §12, §20). Crystal mode models the leakage (9 of 9).
So a per-bin fit of a crystal window that spans fewer than ``ADVICE_PERIODS`` periods of
the scan's lattice says so, in its warnings (and ``provenance["few_periods"]``: window,
periods, period_A), and names crystal mode.

The scan's lattice is crystal mode's first lattice (``fit.lattice.first_lattice``: the
peaks of the scan's central ≤ 128² positions, read once per scan, 0.5 s on a 2-core CPU);
the scan is a crystal's where crystal mode's own test says so on the first small window of
at least ``MIN_PERIODS`` periods (``crystal_contrast`` at the fit's parameters: the
lattice's model explains ``CRYSTAL_CONTRAST`` times what lattices turned or scaled off it
do; 0.1 s a 16² window on a 2-core CPU, ~37 ms on an H100; the verdict kept for the scan,
a narrower window never judging it): an amorphous specimen's speckle, whose peaks also
give a lattice, is not advised about. Only windows narrower than
``ADVICE_MAX_POSITIONS`` positions look, so the large regions and maps of the speed
targets never pay for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..physics.lattice import lattice_periods_A
from ..physics.lattice_peaks import LatticeNotFoundError
from ..results import Bounds
from .lattice import (
    CRYSTAL_CONTRAST,
    MIN_PERIODS,
    crystal_contrast,
    first_lattice,
    lattice_problem,
)

ADVICE_PERIODS = 5.0  # below: the per-bin fit's C10 can be several % off (module docstring)
ADVICE_MAX_POSITIONS = 64  # windows at least this wide on both axes are not looked at
FEW_PERIODS = "few lattice periods"  # how the advice begins (the CLI and widget show it)


@dataclass(frozen=True)
class FewPeriods:
    """A window of few lattice periods: its size (positions), the periods it spans and the
    lattice's longest period."""

    window: tuple[int, int]
    periods: float
    period_A: float

    def warning(self) -> str:
        """The advice in the fit's warnings (the CLI's ``advice:`` line)."""
        h, w = self.window
        return (f"{FEW_PERIODS}: the {h}×{w}-position window spans {self.periods:.1f} periods "
                f"of the scan's {self.period_A:.3g} Å lattice, fewer than {ADVICE_PERIODS:g}, "
                "where the per-bin fit's C10 can be several % off with errors that do not "
                f"cover it (docs/bias-matrix.md §12): {self._what_to_do()} "
                "(object_model=\"lattice\", the widget's crystal box)")

    def _what_to_do(self) -> str:
        if self.periods < MIN_PERIODS:  # crystal mode's own floor (fit.lattice)
            return f"draw it over {MIN_PERIODS:g} periods or more and fit it in crystal mode"
        return "fit it in crystal mode"

    def panel_text(self) -> str:
        """The same, short enough for the widget's region panel."""
        h, w = self.window
        return (f"{FEW_PERIODS}: this {h}×{w} window spans {self.periods:.1f} periods of the "
                f"{self.period_A:.3g} Å lattice, where the per-bin C10 can be several % off: "
                + ("draw it larger, tick crystal" if self.periods < MIN_PERIODS
                   else "tick crystal"))

    def to_dict(self) -> dict[str, Any]:
        return {"window": list(self.window), "periods": self.periods, "period_A": self.period_A}


def few_periods(engine: Any, bounds: Bounds, theta: float, transpose: bool,
                params: Mapping[str, float]) -> FewPeriods | None:
    """The window ``bounds`` of a per-bin fit (``params``) where it spans few periods of a
    crystal's lattice, or None (a wide window, no lattice found, enough periods, or no
    crystal's)."""
    h, w = bounds[1] - bounds[0], bounds[3] - bounds[2]
    if min(h, w) >= ADVICE_MAX_POSITIONS:
        return None
    problem = lattice_problem(engine, bounds, theta, transpose, detector_pixels="points")
    try:
        basis = first_lattice(engine, problem)
    except LatticeNotFoundError:
        return None
    period = max(lattice_periods_A(basis))
    periods = min(h * problem.step[0], w * problem.step[1]) / period
    if periods >= ADVICE_PERIODS:
        return None
    memo = engine.scan_memo  # crystal or not: the scan's, read on its first small window
    if "advice_crystal" not in memo:
        if periods < MIN_PERIODS:  # too few periods for the test (crystal mode's floor)
            return None
        contrast, _ = crystal_contrast(problem.at_basis(basis), basis, params)
        memo["advice_crystal"] = contrast >= CRYSTAL_CONTRAST
    if not memo["advice_crystal"]:
        return None
    return FewPeriods((h, w), float(periods), float(period))


def advice_of(warnings: Sequence[str]) -> list[str]:
    """The few-periods advice among a fit's warnings (the CLI's ``advice:`` lines)."""
    return [w for w in warnings if w.startswith(FEW_PERIODS)]


def panel_advice(provenance: Mapping[str, Any]) -> str:
    """The widget panel's short advice of a fit's ``provenance`` ("" where none)."""
    record = provenance.get("few_periods")
    if not isinstance(record, Mapping):
        return ""
    return FewPeriods((int(record["window"][0]), int(record["window"][1])),
                      float(record["periods"]), float(record["period_A"])).panel_text()

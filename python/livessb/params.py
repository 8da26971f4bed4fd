"""The one parameter table: every fit and reconstruction parameter, its unit and roles.

Physics, fit, engines, results, CLI, benchmark and the widget's front end read
names, units, labels, default boxes, trust-region scales, periods, mirror signs
and the non-negative constraint from here; nothing else spells them out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

MRAD = 1e-3  # rad per mrad


@dataclass(frozen=True)
class Parameter:
    name: str
    unit: str  # "Å" | "rad" | "mrad"
    label: str  # display label (front end, plots)
    box: tuple[float, float]  # default search box
    scale: float  # trust-region scale of Newton steps, in ``unit``
    digits: int  # decimals shown in readouts
    period: float | None = None  # angles: period 2π/m
    mirror_sign: float = 1.0  # sign under θ → θ+π (C12's flip is phi12 + π/2)
    non_negative: bool = False  # magnitudes C_nm (m > 0) and the depth spread
    opt_in: str | None = None  # None: fitted by default; else the ``extra=`` key opting it in
    fittable: bool = True  # False: reconstruction only (the widget's higher-order panel)
    slice_span: float | None = None  # half-width of its loss slice in plots, in ``unit``


def _is_coefficient(name: str) -> bool:
    return len(name) == 3 and name[0] == "C" and name[1:].isdigit()


# Slider half-ranges of the reconstruction-only coefficients by order n, in Å (a few
# times what a corrected column leaves: µm for third order, tens of µm and mm beyond).
_HIGHER_ORDER_RANGE_A: dict[int, float] = {3: 1e5, 4: 1e6, 5: 1e7}


def _reconstruction_only() -> tuple[Parameter, ...]:
    """C32, phi32, C34, phi34, C41 … C56, phi56: the orders physics/optics.chi accepts
    beyond the fitted ones; magnitudes ≥ 0 with an angle of period 2π/m (C50 is signed)."""
    out: list[Parameter] = []
    for n, m in ((3, 2), (3, 4), (4, 1), (4, 3), (4, 5), (5, 0), (5, 2), (5, 4), (5, 6)):
        r = _HIGHER_ORDER_RANGE_A[n]
        name = f"C{n}{m}"
        if m == 0:
            out.append(Parameter(name, "Å", name, (-r, r), r / 100, 0, fittable=False))
            continue
        out.append(Parameter(name, "Å", name, (0.0, r), r / 100, 0, non_negative=True,
                             fittable=False))
        out.append(Parameter(f"phi{n}{m}", "rad", f"φ{n}{m}", (-math.pi / m, math.pi / m),
                             0.1, 3, period=2 * math.pi / m, fittable=False))
    return tuple(out)


TABLE: tuple[Parameter, ...] = (
    Parameter("C10", "Å", "C10", (-500.0, 500.0), 10.0, 1, mirror_sign=-1.0, slice_span=50.0),
    Parameter("C12", "Å", "C12", (0.0, 100.0), 5.0, 1, non_negative=True, slice_span=20.0),
    Parameter("phi12", "rad", "φ12", (-math.pi / 2, math.pi / 2), 0.1, 3, period=math.pi,
              slice_span=math.pi / 4),
    Parameter("tilt_row_mrad", "mrad", "tilt r", (-15.0, 15.0), 1.0, 2, mirror_sign=-1.0,
              slice_span=5.0),
    Parameter("tilt_col_mrad", "mrad", "tilt c", (-15.0, 15.0), 1.0, 2, mirror_sign=-1.0,
              slice_span=5.0),
    Parameter("depth", "Å", "depth", (0.0, 500.0), 20.0, 1, non_negative=True,
              slice_span=50.0),
    # Opt-in coefficients (Session.fit(extra=...)): coma, three-fold, spherical.
    Parameter("C21", "Å", "C21", (0.0, 2000.0), 50.0, 0, non_negative=True, opt_in="C21"),
    Parameter("phi21", "rad", "φ21", (-math.pi, math.pi), 0.1, 3, period=2 * math.pi,
              opt_in="C21"),
    Parameter("C23", "Å", "C23", (0.0, 2000.0), 50.0, 0, non_negative=True, opt_in="C23"),
    Parameter("phi23", "rad", "φ23", (-math.pi / 3, math.pi / 3), 0.1, 3,
              period=2 * math.pi / 3, opt_in="C23"),
    Parameter("C30", "Å", "C30", (-2e5, 2e5), 2000.0, 0, mirror_sign=-1.0, opt_in="C30"),
    # Reconstruction only (Session.reconstruct, the widget's higher-order panel): the box is
    # the slider range; never fitted, so fit_names and the search box refuse them.
    *_reconstruction_only(),
)
BY_NAME: dict[str, Parameter] = {p.name: p for p in TABLE}
FITTABLE: tuple[Parameter, ...] = tuple(p for p in TABLE if p.fittable)
# Krivanek (n, m) orders of every C_nm in the table, in table order (the order χ sums them).
ABERRATION_ORDERS: tuple[tuple[int, int], ...] = tuple(
    (int(p.name[1]), int(p.name[2])) for p in TABLE if _is_coefficient(p.name))
ABERRATION_KEYS: frozenset[str] = frozenset(
    p.name for p in TABLE if _is_coefficient(p.name) or p.name.startswith("phi"))

# The six joint parameters, in vector order.
JOINT: tuple[str, ...] = tuple(p.name for p in FITTABLE if p.opt_in is None)
N_JOINT = len(JOINT)
# extra= key -> the names it opts in (a magnitude and its angle, or C30 alone).
OPTIONAL: dict[str, tuple[str, ...]] = {
    key: tuple(p.name for p in FITTABLE if p.opt_in == key)
    for key in dict.fromkeys(p.opt_in for p in FITTABLE if p.opt_in is not None)}
# The fit's vocabulary: fittable parameters only (reconstruction-only ones are refused).
DEFAULT_BOX: dict[str, tuple[float, float]] = {p.name: p.box for p in FITTABLE}
PERIODS: dict[str, float] = {p.name: p.period for p in FITTABLE if p.period is not None}
NON_NEGATIVE: tuple[str, ...] = tuple(p.name for p in FITTABLE if p.non_negative)
MIRROR_SIGN: dict[str, float] = {p.name: p.mirror_sign for p in FITTABLE
                                 if p.mirror_sign != 1.0}
SCALES: dict[str, float] = {p.name: p.scale for p in FITTABLE}
# Parameters that are not aberration coefficients (tilt and depth spread).
GEOMETRY_KEYS: frozenset[str] = frozenset(p.name for p in TABLE) - ABERRATION_KEYS


def fit_names(extra: tuple[str, ...] | list[str] = ()) -> tuple[str, ...]:
    """The six joint parameters plus opted-in coefficients (and their angles)."""
    unknown = [e for e in extra if e not in OPTIONAL]
    if unknown:
        raise ValueError(f"cannot opt {unknown} into the fit: choose from {sorted(OPTIONAL)}")
    return JOINT + tuple(n for key in OPTIONAL if key in extra for n in OPTIONAL[key])


def on_circle(name: str, difference: float) -> float:
    """A difference of parameter ``name``'s values, within ± half its period for an angle
    (the shorter way round its circle); unchanged for any other parameter."""
    period = BY_NAME[name].period if name in BY_NAME else None
    return difference if period is None else (difference + period / 2) % period - period / 2


def to_vector(params: Mapping[str, float], names: tuple[str, ...] = JOINT,
              default: float | None = None) -> np.ndarray:
    """float64 vector of ``params`` in ``names`` order (missing → ``default``, or KeyError)."""
    if default is None:
        return np.array([float(params[n]) for n in names], dtype=np.float64)
    return np.array([float(params.get(n, default)) for n in names], dtype=np.float64)


def from_vector(vector: Any, names: tuple[str, ...] = JOINT) -> dict[str, float]:
    """Parameter dict of a vector in ``names`` order."""
    return {n: float(v) for n, v in zip(names, vector, strict=True)}


def scale_of(names: tuple[str, ...]) -> np.ndarray:
    return np.array([SCALES[p] for p in names])


def table_for_frontend() -> list[dict[str, Any]]:
    """The table as plain JSON rows (the widget's ``param_table`` trait)."""
    rows = []
    for p in TABLE:
        row = asdict(p)
        row["box"] = [float(p.box[0]), float(p.box[1])]
        rows.append(row)
    return rows

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


TABLE: tuple[Parameter, ...] = (
    Parameter("C10", "Å", "C10", (-500.0, 500.0), 10.0, 1, mirror_sign=-1.0),
    Parameter("C12", "Å", "C12", (0.0, 100.0), 5.0, 1, non_negative=True),
    Parameter("phi12", "rad", "φ12", (-math.pi / 2, math.pi / 2), 0.1, 3, period=math.pi),
    Parameter("tilt_row_mrad", "mrad", "tilt r", (-15.0, 15.0), 1.0, 2, mirror_sign=-1.0),
    Parameter("tilt_col_mrad", "mrad", "tilt c", (-15.0, 15.0), 1.0, 2, mirror_sign=-1.0),
    Parameter("depth", "Å", "depth", (0.0, 500.0), 20.0, 1, non_negative=True),
    # Opt-in coefficients (Session.fit(extra=...)): coma, three-fold, spherical.
    Parameter("C21", "Å", "C21", (0.0, 2000.0), 50.0, 0, non_negative=True, opt_in="C21"),
    Parameter("phi21", "rad", "φ21", (-math.pi, math.pi), 0.1, 3, period=2 * math.pi,
              opt_in="C21"),
    Parameter("C23", "Å", "C23", (0.0, 2000.0), 50.0, 0, non_negative=True, opt_in="C23"),
    Parameter("phi23", "rad", "φ23", (-math.pi / 3, math.pi / 3), 0.1, 3,
              period=2 * math.pi / 3, opt_in="C23"),
    Parameter("C30", "Å", "C30", (-2e5, 2e5), 2000.0, 0, mirror_sign=-1.0, opt_in="C30"),
)
BY_NAME: dict[str, Parameter] = {p.name: p for p in TABLE}

# The six joint parameters, in vector order.
JOINT: tuple[str, ...] = tuple(p.name for p in TABLE if p.opt_in is None)
N_JOINT = len(JOINT)
# extra= key -> the names it opts in (a magnitude and its angle, or C30 alone).
OPTIONAL: dict[str, tuple[str, ...]] = {
    key: tuple(p.name for p in TABLE if p.opt_in == key)
    for key in dict.fromkeys(p.opt_in for p in TABLE if p.opt_in is not None)}
DEFAULT_BOX: dict[str, tuple[float, float]] = {p.name: p.box for p in TABLE}
PERIODS: dict[str, float] = {p.name: p.period for p in TABLE if p.period is not None}
NON_NEGATIVE: tuple[str, ...] = tuple(p.name for p in TABLE if p.non_negative)
MIRROR_SIGN: dict[str, float] = {p.name: p.mirror_sign for p in TABLE if p.mirror_sign != 1.0}
SCALES: dict[str, float] = {p.name: p.scale for p in TABLE}


def fit_names(extra: tuple[str, ...] | list[str] = ()) -> tuple[str, ...]:
    """The six joint parameters plus opted-in coefficients (and their angles)."""
    unknown = [e for e in extra if e not in OPTIONAL]
    if unknown:
        raise ValueError(f"cannot opt {unknown} into the fit: choose from {sorted(OPTIONAL)}")
    return JOINT + tuple(n for key in OPTIONAL if key in extra for n in OPTIONAL[key])


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

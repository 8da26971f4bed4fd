"""Plausible ranges of the calibration, and the unit mistake a value outside one suggests.

A scan step of 60 "Å" is almost surely 60 pm (0.6 Å) and a voltage of 200000 "kV"
almost surely volts: such values are refused before anything is allocated, with the
likely mistake named. Unusual but real set-ups pass with ``allow_unusual=True``
(CLI ``--force``), or for a block of code with :func:`unusual_values_allowed`.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Plausible:
    name: str  # the keyword, e.g. "scan_step_A"
    what: str  # in words, e.g. "scan step"
    unit: str
    low: float
    high: float
    # (factor to this unit, the unit the value would then have been in)
    mistakes: tuple[tuple[float, str], ...]


RANGES: dict[str, Plausible] = {p.name: p for p in (
    Plausible("voltage_kV", "voltage", "kV", 5.0, 1500.0,
              ((1e-3, "volts"), (1e3, "MV"))),
    Plausible("semiangle_mrad", "convergence semiangle", "mrad", 0.5, 100.0,
              ((1e3, "rad"), (1e-3, "µrad"))),
    Plausible("scan_step_A", "scan step", "Å", 0.005, 20.0,
              ((1e-2, "pm"), (10.0, "nm"), (1e10, "metres"), (1e4, "µm"))),
    Plausible("detector_sampling_mrad", "detector sampling", "mrad/px", 0.005, 20.0,
              ((1e3, "rad/px"), (1e-3, "µrad/px"))),
)}

_ALLOW_UNUSUAL: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "livessb_allow_unusual", default=False)


@contextlib.contextmanager
def unusual_values_allowed(allow: bool = True) -> Iterator[None]:
    """Datasets built inside (e.g. by ``livessb.load``) accept values outside the ranges."""
    token = _ALLOW_UNUSUAL.set(allow)
    try:
        yield
    finally:
        _ALLOW_UNUSUAL.reset(token)


def unusual_allowed(allow: bool | None = None) -> bool:
    return _ALLOW_UNUSUAL.get() if allow is None else bool(allow)


def implausibility(name: str, value: float, label: str | None = None) -> str | None:
    """None when ``value`` is plausible, else a message naming the value, the likely unit
    mistake and the override."""
    p = RANGES[name]
    if p.low <= value <= p.high:
        return None
    label = label or name
    guess = ""
    for factor, unit in p.mistakes:
        if p.low <= value * factor <= p.high:
            guess = (f": it looks like {unit} — {value:g} {unit} is {value * factor:g} {p.unit}, "
                     f"so pass {label}={value * factor:g}")
            break
    return (
        f"{label}={value:g} {p.unit} is outside the plausible {p.what} range "
        f"{p.low:g}–{p.high:g} {p.unit}{guess}; if the value is right for an unusual set-up, "
        "pass allow_unusual=True (Dataset4D), or load inside "
        "`with livessb.unusual_values_allowed():`")

"""Scan-window apodisation of the fit's spectra (docs/bias-matrix.md §6, §9).

A crystal's lattice rarely fits the scan window: each Bragg peak leaks into every bin
of the window's FFT (a rectangular window's sidelobes fall as 1/d: 2.3 % of a peak
3 bins away), and a bin then also carries the other peaks' Γ(g′). With a free object
per trotter lobe that reads as ~1 % of C10 on a window of ~3 lattice periods. With
``scan_window="hann"`` the fit's spectra are those of (I − Ī)·h, h(R) = 1 − cos(2πR/n) a
Hann window periodic over the n measured positions of each scan axis (a peak's leakage
then falls as 1/d³), each bin at the frequency its signal has measured under the same
window (``physics.frequencies``, a table over ±1.5 bins: the window spreads a peak over
three). Reconstructions always use the unapodised spectra.

The cost is noise: the fit on apodised spectra is a least-squares fit weighted by h² over
the scan positions, and neighbouring bins share noise, so a parameter's variance grows
by the design factor Π_axes mean(h⁴)/mean(h²)² (1.94 per axis for a Hann: errors ×1.94
on a 2-D window) over what the frequency-independent noise sums count; the errors apply
it (``fit.errors.NoiseLevel.design``). It pays where the bias it removes exceeds that:
few lattice periods in the window (small regions, map tiles, short scans) at high dose.
Pure; ``xp`` is numpy or cupy.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .settings import check_setting

SCAN_WINDOWS = ("none", "hann", "auto")


def check_scan_window(value: str) -> str:
    return check_setting("scan_window", value, SCAN_WINDOWS,
                         "'none' fits the spectra of the measured window as it is, 'hann' "
                         "apodises the scan window first (removes the leakage between "
                         "lattice peaks of a window of few periods; errors about ×2, "
                         "docs/bias-matrix.md §9), 'auto' fits 'hann' and reports the "
                         "unapodised fit where the window check finds no leakage and "
                         "smaller errors (§10)")


def scan_window_for(value: str | None, calibration: dict[str, Any] | None) -> str:
    """The setting a session uses: the one asked for; else a restored calibration's (its
    full fit's provenance; "none" for a file saved before the key existed), so that its
    parameters mean what they meant; else "none" (the default)."""
    if value is not None:
        return check_scan_window(value)
    fit = (calibration or {}).get("full_fit") or {}
    return check_scan_window(str(fit.get("provenance", {}).get("scan_window", "none")))


def apodised_for(scan_window: str, apodise: bool | None) -> bool:
    """Whether a window's spectra are apodised: ``apodise`` when given (False for the
    session's reconstructions), else as the engine's ``scan_window``."""
    return scan_window != "none" if apodise is None else bool(apodise)


def spectra_sets(scan_window: str) -> int:
    """Full-field spectra sets a session holds: the fit's apodised ones besides the
    reconstructions' unapodised ones unless the window is "none"."""
    return 1 if check_scan_window(scan_window) == "none" else 2


@functools.lru_cache(maxsize=64)  # every window of a map shares its sizes
def hann(n: int) -> np.ndarray:
    """h(R) = 1 − cos(2πR/n) over n positions (mean 1), read-only."""
    out = 1.0 - np.cos(2 * np.pi * np.arange(int(n)) / int(n))
    out.setflags(write=False)
    return out


def hann_2d(data_shape: tuple[int, int], shape: tuple[int, int], xp: Any = np,
            dtype: Any = np.float64) -> Any:
    """(Nr, Nc) weights over the padded ``shape``: h_r ⊗ h_c on the measured
    ``data_shape`` positions, 0 on the padding (where the mean-removed data are 0)."""
    out = np.zeros(shape, dtype=dtype)
    out[:data_shape[0], :data_shape[1]] = np.outer(hann(data_shape[0]), hann(data_shape[1]))
    return xp.asarray(out)


def design_factor(data_shape: tuple[int, int]) -> float:
    """Π_axes mean(h⁴)/mean(h²)²: the variance factor of a parameter fitted to the
    apodised spectra of a window of ``data_shape`` positions over what independent bins
    count (module docstring); 1 for a window of one position per axis."""
    out = 1.0
    for n in data_shape:
        h = hann(int(n))
        m2 = float(np.mean(h**2))
        if m2 > 0:
            out *= float(np.mean(h**4)) / m2**2
    return out


def power_factor(data_shape: tuple[int, int]) -> float:
    """Π_axes mean(h²): the apodised spectra's counting-noise level over the
    unapodised one (the Poisson level of the errors)."""
    out = 1.0
    for n in data_shape:
        out *= float(np.mean(hann(int(n)) ** 2))
    return out

"""Preprocessing before the spectra: descan, per-frame dose normalisation and bad
detector pixels (docs/preprocessing.md)."""

from __future__ import annotations

from .corrections import CorrectedCounts, Corrections, prepare_corrections, preprocess_for
from .descan import DescanFit
from .options import Preprocessing

__all__ = ["CorrectedCounts", "Corrections", "DescanFit", "Preprocessing",
           "prepare_corrections", "preprocess_for"]

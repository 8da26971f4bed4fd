"""What a session corrects before the spectra: the user's choices (``Preprocessing``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

DESCAN_MODELS = ("plane", "smooth")


@dataclass(frozen=True, eq=False)
class Preprocessing:
    """Corrections applied to the counts before the spectra (see docs/preprocessing.md).

    ``descan``: "plane" (default), "smooth" (polynomial of ``smooth_degree`` in the scan
    position) or None: measure the BF disk centre per scan position, fit it, and shift
    every frame back (sub-pixel, bilinear) by the fitted variation; a fit whose span
    across the scan is below ``descan_threshold_px`` (or within its noise) leaves the data
    untouched. ``dose_normalise``: scale each frame by the mean total counts over its
    own (beam-current fluctuation). ``find_bad_pixels``: flag hot pixels (mean above
    ``hot_factor`` × the second-brightest neighbour, beyond noise) and dead ones (always
    zero where ≥ ``dead_counts`` are expected over the scan); ``detector_mask`` (bool,
    detector shape, True = use) adds the user's own. Bad pixels are replaced by the mean
    of their good neighbours in every frame.
    """

    descan: str | None = "plane"
    dose_normalise: bool = False
    detector_mask: np.ndarray | None = None
    find_bad_pixels: bool = True
    descan_threshold_px: float = 0.05
    smooth_degree: int = 3
    hot_factor: float = 2.0
    dead_counts: float = 30.0

    def __post_init__(self) -> None:
        if self.descan is not None and self.descan not in DESCAN_MODELS:
            raise ValueError(f"descan must be 'plane', 'smooth' or None, got {self.descan!r}")
        if not isinstance(self.dose_normalise, (bool, np.bool_)):
            raise ValueError(f"dose_normalise must be True or False, got {self.dose_normalise!r}")
        if not (isinstance(self.smooth_degree, int) and 1 <= self.smooth_degree <= 5):
            raise ValueError(f"smooth_degree must be an integer 1..5, got {self.smooth_degree!r}")
        for name in ("descan_threshold_px", "hot_factor", "dead_counts"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive number, got {v!r}")
        if self.detector_mask is not None:
            m = np.asarray(self.detector_mask)
            if m.dtype != np.bool_ or m.ndim != 2:
                raise ValueError(
                    "detector_mask must be a 2-D bool array of the detector's shape "
                    f"(True = use the pixel), got dtype {m.dtype} and shape {m.shape}")
            object.__setattr__(self, "detector_mask", m.copy())

    @classmethod
    def off(cls) -> Preprocessing:
        """No correction at all: the counts reach the spectra as measured."""
        return cls(descan=None, dose_normalise=False, find_bad_pixels=False)

    @property
    def degree(self) -> int:
        return 1 if self.descan == "plane" else int(self.smooth_degree)

    def to_dict(self) -> dict[str, Any]:
        """The options (the user's mask travels as the resulting bad-pixel list)."""
        return {"descan": self.descan, "dose_normalise": bool(self.dose_normalise),
                "find_bad_pixels": bool(self.find_bad_pixels),
                "descan_threshold_px": float(self.descan_threshold_px),
                "smooth_degree": int(self.smooth_degree),
                "hot_factor": float(self.hot_factor), "dead_counts": float(self.dead_counts)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Preprocessing:
        keys = ("descan", "dose_normalise", "find_bad_pixels", "descan_threshold_px",
                "smooth_degree", "hot_factor", "dead_counts")
        return cls(**{k: d[k] for k in keys if k in d})

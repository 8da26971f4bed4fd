"""A dataset at another detector sampling, and the fitted sampling a calibration records.

The opt-in joint fit of the detector sampling (``Session.fit(fit_detector_sampling=True)``,
``fit.sampling``) continues the session on a shallow copy of its dataset that carries the
fitted value; a calibration file records it in the full fit's provenance
(``provenance["detector_sampling"]``), and a session restored from that file runs at it.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

from .dataset import Dataset4D, DatasetError

PROVENANCE_KEY = "detector_sampling"


def with_detector_sampling(dataset: Dataset4D, sampling_mrad: float) -> Dataset4D:
    """``dataset`` (same counts, mean pattern and BF disk, same semiangle) at
    ``sampling_mrad`` mrad/px: every detector frequency scales with it and the aperture's
    radius in pixels is semiangle/sampling. The sampling is marked as given (not derived
    from the BF radius). A DatasetError when the disk no longer fits the detector."""
    if not (math.isfinite(sampling_mrad) and sampling_mrad > 0):
        raise DatasetError(f"detector sampling must be positive and finite, got "
                           f"{sampling_mrad!r} mrad/px")
    view = copy.copy(dataset)
    view.detector_sampling_mrad = float(sampling_mrad)
    view.detector_sampling_derived = False
    view._check_disk_fits()
    return view


def fitted_sampling(document: Mapping[str, Any]) -> float | None:
    """The fitted detector sampling (mrad/px) a calibration document's full fit records,
    or None (not fitted, or a file written before the opt-in existed)."""
    full = document.get("full_fit") or {}
    record = (full.get("provenance") or {}).get(PROVENANCE_KEY) if isinstance(full, dict) else None
    if not isinstance(record, dict) or not record.get("fitted"):
        return None
    return float(record["mrad"])


def restored(dataset: Dataset4D, document: Mapping[str, Any] | None) -> Dataset4D:
    """``dataset`` at the sampling ``document`` fitted, else ``dataset`` itself."""
    mrad = None if document is None else fitted_sampling(document)
    return dataset if mrad is None else with_detector_sampling(dataset, mrad)

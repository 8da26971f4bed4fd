"""Building the ``Dataset4D``, with errors that say which values came from the file."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from ..dataset import Dataset4D, DatasetError
from .metadata import FileCalibration


def build_dataset(counts: Any, calibration: dict[str, Any], user: Mapping[str, Any],
                  file_cal: FileCalibration | None, name: str) -> Dataset4D:
    """``Dataset4D`` whose errors say which values came from the file's metadata.

    A detector sampling taken from the file that disagrees with the measured BF
    disk by more than 20 % is kept (the file is trusted) but warned about.
    """
    from_file = {k: v for k, v in calibration.items() if v is not None and k not in user}
    sources = file_cal.sources if file_cal is not None else {}
    try:
        ds = Dataset4D(counts, **calibration)
    except DatasetError as exc:
        if not from_file:
            raise
        used = ", ".join(f"{k}={_fmt(v)}" + (f" ({sources[k]})" if k in sources else "")
                         for k, v in from_file.items())
        raise DatasetError(
            f"{exc} [values from {name}'s metadata: {used}; pass them as keywords to "
            "override]") from exc
    if "detector_sampling_mrad" in from_file:
        expected = ds.semiangle_mrad / ds.detector_sampling_mrad
        measured = ds.bright_field.radius_px
        if abs(expected - measured) > 0.2 * measured:
            src = sources.get("detector_sampling_mrad") or sources.get(
                "detector_sampling_inv_A") or "pixel size / camera length"
            warnings.warn(
                f"{name}: the detector sampling from the file ({ds.detector_sampling_mrad:.4g} "
                f"mrad/px, {src}) puts the {ds.semiangle_mrad:g} mrad aperture at "
                f"{expected:.1f} px but the BF disk measures {measured:.1f} px: check the "
                "semiangle, or pass detector_sampling_mrad="
                f"{ds.semiangle_mrad / measured:.4g} (the value the disk implies)",
                stacklevel=3)
    return ds


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, tuple | list):
        return "(" + ", ".join(_fmt(v) for v in value) + ")"
    return repr(value)


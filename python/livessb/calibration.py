"""Calibration files: schema, atomic save, restore, mismatch checks."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ._version import __version__
from .atomic import atomic_write_text
from .dataset import Dataset4D, DatasetError
from .detector_sampling import restored
from .results import FitResult

SCHEMA = "livessb.calibration"
SCHEMA_VERSION = 1


class CalibrationError(ValueError):
    """A calibration file that cannot be used (corrupt, other schema, other dataset)."""


def calibration_document(
    dataset: Dataset4D,
    rotation_deg: float,
    transpose: bool,
    upsample: int,
    full_fit: FitResult | None,
    regions: list[tuple[str, FitResult]],
    provenance: dict[str, Any],
    maps: list[dict[str, Any]] | None = None,
    preprocessing: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The calibration record; ``maps`` (optional, ``MapResult.to_dict`` records) and
    ``preprocessing`` are written only when present, and files without them load as before."""
    doc = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "software": {"name": "livessb", "version": __version__},
        "created": datetime.now(UTC).isoformat(),
        "dataset": dataset.signature(),
        "rotation_deg": rotation_deg,
        "transpose": transpose,
        "upsample": upsample,
        "full_fit": full_fit.to_dict() if full_fit is not None else None,
        "regions": [{"id": rid, "bounds": list(fit.bounds or ()), "fit": fit.to_dict()}
                    for rid, fit in regions],
        "provenance": provenance,
        **({"maps": maps} if maps else {}),
    }
    if preprocessing is not None:  # optional: files without it load (nothing corrected)
        doc["preprocessing"] = preprocessing
    return doc


def save_calibration(path: str | Path, document: dict[str, Any]) -> Path:
    return atomic_write_text(path, json.dumps(document, indent=1, allow_nan=False))


def load_calibration(path: str | Path, dataset: Dataset4D, force: bool = False) -> dict[str, Any]:
    """Read and check a calibration file against ``dataset`` (``force`` skips the match)."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CalibrationError(f"calibration file {path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CalibrationError(
            f"calibration file {path} is corrupt (not valid JSON: {exc}); restore it from a "
            "backup or refit and save again") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise CalibrationError(f"{path} is not a livessb calibration file (schema {SCHEMA!r})")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise CalibrationError(
            f"{path} has calibration schema version {doc.get('schema_version')!r}; this "
            f"livessb reads version {SCHEMA_VERSION}: refit and save with this version")
    for key in ("dataset", "rotation_deg", "transpose", "full_fit", "regions"):
        if key not in doc:
            raise CalibrationError(f"calibration file {path} is corrupt: missing {key!r}")
    if not force:  # a fitted detector sampling is the file's: compare at it
        try:
            current = restored(dataset, doc).signature()
        except (DatasetError, KeyError, TypeError, ValueError) as exc:
            raise CalibrationError(f"calibration file {path}: its fitted detector sampling "
                                   f"cannot be applied to this dataset ({exc})") from None
        _check_signature(path, doc["dataset"], current)
    return doc


def _check_signature(path: Path, saved: dict[str, Any], current: dict[str, Any]) -> None:
    for key, what in (("shape", "shape"), ("dtype", "dtype"), ("calibration", "calibration"),
                      ("content_sha256", "content")):
        if saved.get(key) != current.get(key):
            raise CalibrationError(
                f"calibration file {path} was made for a different dataset ({what} differs: "
                f"file {saved.get(key)!r}, data {current.get(key)!r}); load the matching data, "
                "or pass force=True to apply it anyway")

"""Calibration metadata gathered from an HDF5 file's attributes and metadata groups."""

from __future__ import annotations

from typing import Any

from .h5 import attrs_dict, h5py_module
from .metadata import FileCalibration, parse_attrs

_METADATA_GROUP_HINTS = (
    "instrument", "metadata", "calibration", "microscope", "beam", "detector", "optics",
    "acquisition", "experiment", "scan", "source")
_MAX_METADATA_OBJECTS = 5000


def collect_metadata(f: Any, dset: Any, name: str) -> FileCalibration:
    """Calibration from the dataset's attributes, its parents, and metadata-like groups.

    Priority: the dataset's own attributes, then its parent groups (nearest
    first), then the root, then scalar datasets/attributes in groups whose name
    suggests metadata (``instrument``, ``metadata``, ``beam``, ``detector``...).
    """
    h5py = h5py_module()
    cal = FileCalibration()
    if dset is not None:
        cal.update_missing(parse_attrs(attrs_dict(dset), f"{name}:{dset.name}"))
        parent = dset.parent
        while True:
            cal.update_missing(parse_attrs(attrs_dict(parent), f"{name}:{parent.name}"))
            if parent.name == "/":
                break
            parent = parent.parent
    else:
        cal.update_missing(parse_attrs(attrs_dict(f), f"{name}:/"))
    found: dict[str, Any] = {}
    count = 0

    def visit(path: str, obj: Any) -> Any:
        nonlocal count
        count += 1
        if count > _MAX_METADATA_OBJECTS:
            return True  # stop: metadata search is bounded
        lower = path.lower()
        if not any(h in lower for h in _METADATA_GROUP_HINTS):
            return None
        if isinstance(obj, h5py.Group):
            for k, v in attrs_dict(obj).items():
                found.setdefault(f"{path}/{k}", v)
        elif isinstance(obj, h5py.Dataset) and obj.size <= 2 and obj.dtype.fields is None:
            try:
                value = obj[()]
            except Exception:
                return None
            units = obj.attrs.get("units") if "units" in obj.attrs else None
            found.setdefault(path, (value, units) if isinstance(units, str | bytes) else value)
            for k, v in attrs_dict(obj).items():
                if k != "units":
                    found.setdefault(f"{path}/{k}", v)
        return None

    try:
        f.visititems(visit)
    except Exception:  # metadata is best effort; the counts are read separately
        pass
    cal.update_missing(parse_attrs(_last_component_first(found), f"{name}"))
    return cal


def _last_component_first(found: dict[str, Any]) -> dict[str, Any]:
    """Map ``a/b/key`` -> ``key`` (first occurrence wins), keeping the path in messages."""
    out: dict[str, Any] = {}
    for path, value in found.items():
        out.setdefault(path.rsplit("/", 1)[-1], value)
    return out

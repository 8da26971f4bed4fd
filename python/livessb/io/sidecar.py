"""Sidecar files: the scan shape and calibration written next to the counts.

Detectors that store frames only (Dectris/Arina masters, ``.mib``, ``.npy``
stacks) leave the scan shape and step to the scan system. Two sidecars are read:

* the Arina metadata file ``<base>.h5`` next to ``<base>_master.h5`` (newer
  Arina firmware): group ``STEM Metadata``, attribute ``Pixel Size`` (nm, the
  scan step, as rosettasciio, py4DSTEM and ncempy read it); its other attributes
  are matched like any metadata, and a scan shape is taken from the keys below;
* a JSON or TOML mapping (``<name>.json``/``<name>.toml`` next to the file, or
  ``<base>.json``/``<base>.toml`` for ``<base>_master.h5``, or ``sidecar=path``),
  e.g. ``{"scan_shape": [256, 256], "scan_step": "0.42 A", "voltage_kV": 300,
  "semiangle_mrad": 21.4}``; nested tables are allowed (keys are matched on their
  last component). Calibration keys are those of ``livessb.io.metadata``.

Scan shape keys: ``scan_shape`` (``[rows, cols]``), or ``scan_rows`` + ``scan_cols``,
or ``scan_height`` + ``scan_width`` (also ``Scan Height``/``Scan Width`` etc.).
A livessb calibration file (``"schema": "livessb.calibration"``) is never read as
a sidecar. A sidecar found automatically that cannot be read is warned about and
ignored; one passed as ``sidecar=`` raises.
"""

from __future__ import annotations

import json
import tomllib
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..dataset import DatasetError
from .h5 import attrs_dict, open_hdf5
from .metadata import FileCalibration, normalise_key, parse_attrs

ARINA_GROUP = "STEM Metadata"
_SHAPE_KEYS = ("scan_shape", "scan_size", "navigation_shape")
_ROW_KEYS = ("scan_rows", "scan_height", "scan_size_y", "scan_y", "rows")
_COL_KEYS = ("scan_cols", "scan_columns", "scan_width", "scan_size_x", "scan_x", "cols")


@dataclass
class Sidecar:
    """What a sidecar says: scan shape (rows, cols) and calibration; where it came from."""

    path: Path
    scan_shape: tuple[int, int] | None = None
    calibration: FileCalibration = field(default_factory=FileCalibration)


def sidecar_candidates(path: Path) -> list[Path]:
    """Files next to ``path`` read automatically as its sidecar, in order."""
    stems = [path.with_suffix("")]
    name = path.name
    if name.lower().endswith("_master.h5"):
        stems.append(path.with_name(name[: -len("_master.h5")]))
    out: list[Path] = []
    for stem in stems:
        out += [stem.with_name(stem.name + ".json"), stem.with_name(stem.name + ".toml")]
    if len(stems) > 1:
        out.append(stems[1].with_name(stems[1].name + ".h5"))  # Arina metadata file
    return [p for p in out if p != path]


def find_sidecar(path: Path, explicit: str | Path | None) -> Sidecar | None:
    """The explicit sidecar (errors raise), else the first readable one found next to ``path``."""
    if explicit is not None:
        side = Path(explicit).expanduser()
        if not side.is_file():
            raise FileNotFoundError(f"sidecar={str(side)!r}: no such file")
        found = read_sidecar(side)
        if found is None:
            raise DatasetError(
                f"sidecar {side.name}: neither a JSON/TOML mapping nor an Arina metadata file "
                f"(HDF5 with a {ARINA_GROUP!r} group): pass the file the scan system wrote")
        return found
    for cand in sidecar_candidates(path):
        if not cand.is_file():
            continue
        try:
            found = read_sidecar(cand)
        except DatasetError as exc:
            warnings.warn(f"{path.name}: ignoring the sidecar {cand.name} ({exc}); pass "
                          "sidecar=... to use a specific file", stacklevel=3)
            continue
        if found is not None:
            return found
    return None


def read_sidecar(path: Path) -> Sidecar | None:
    """A JSON/TOML or Arina HDF5 sidecar; ``None`` if it is not one (e.g. a calibration file)."""
    suffix = path.suffix.lower()
    if suffix in (".h5", ".hdf5"):
        return _read_arina(path)
    try:
        text = path.read_text(encoding="utf-8")
        doc = tomllib.loads(text) if suffix == ".toml" else json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DatasetError(f"{path.name} is not valid {suffix.lstrip('.').upper()} ({exc}): "
                           "fix or remove it") from None
    if not isinstance(doc, dict):
        raise DatasetError(f"{path.name} holds a {type(doc).__name__}, not a mapping of keys "
                           "such as scan_shape, scan_step_A, voltage_kV")
    if doc.get("schema") == "livessb.calibration":
        return None
    flat = flatten(doc)
    return Sidecar(path, scan_shape_from(flat, path.name), parse_attrs(flat, path.name))


def _read_arina(path: Path) -> Sidecar | None:
    try:
        with open_hdf5(path, path.name) as f:
            group = f.get(ARINA_GROUP)
            if group is None:
                return None
            attrs = attrs_dict(group)
    except DatasetError:
        return None
    flat = {normalise_key(k): v for k, v in attrs.items()}
    if "pixel_size" in flat:
        # The Arina writes the scan step in nm, without a unit.
        flat.setdefault("scan_step", (_first(flat.pop("pixel_size")), "nm"))
    return Sidecar(path, scan_shape_from(flat, path.name),
                   parse_attrs(flat, f"{path.name}:/{ARINA_GROUP}"))


def flatten(doc: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested tables flattened to their last key component (first occurrence wins)."""
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if isinstance(value, Mapping):
            for k, v in flatten(value, f"{prefix}{key}/").items():
                out.setdefault(k, v)
        else:
            out.setdefault(normalise_key(key), tuple(value) if isinstance(value, list) and
                           len(value) == 2 and isinstance(value[1], str) else value)
    return out


def _first(value: Any) -> float:
    arr = np.asarray(value, dtype=np.float64).reshape(-1)
    return float(arr[0])


def scan_shape_from(flat: Mapping[str, Any], name: str) -> tuple[int, int] | None:
    """(rows, cols) from the scan-shape keys; ``DatasetError`` if present but unusable."""
    for key in _SHAPE_KEYS:
        if key in flat:
            return _shape(flat[key], f"{name}:{key}")
    rows = next((flat[k] for k in _ROW_KEYS if k in flat), None)
    cols = next((flat[k] for k in _COL_KEYS if k in flat), None)
    if rows is None and cols is None:
        return None
    if rows is None or cols is None:
        side = "rows" if cols is None else "cols"
        raise DatasetError(f"{name} gives only one side of the scan ({side}): write both, "
                           "or scan_shape = [rows, cols]")
    return _shape([_first(rows), _first(cols)], name)


def _shape(value: Any, where: str) -> tuple[int, int]:
    try:
        vals = [float(v) for v in np.asarray(value, dtype=np.float64).reshape(-1)]
    except (TypeError, ValueError):
        vals = []
    if len(vals) != 2 or not all(v >= 1 and v == int(v) for v in vals):
        raise DatasetError(f"{where} = {value!r} is not a scan shape: write [rows, cols], "
                           "two positive integers")
    return (int(vals[0]), int(vals[1]))

"""Writing EMD 1.0 (HDF5) files that py4DSTEM, HyperSpy and livessb itself open.

The layout is the one ``emdfile`` (py4DSTEM ≥ 0.14) writes:

* file attributes ``emd_group_type="file"``, ``version_major=1``, ``version_minor=0``;
* a root group (``emd_group_type="root"``) holding one array group
  (``emd_group_type="array"``, ``python_class`` ``"DataCube"`` for counts,
  ``"Array"`` for an image) with ``data`` and one ``dim0…dimN`` vector per axis
  (first two values, ``name`` and ``units`` attributes): scan/image axes in ``A``
  (Å), detector axes in ``mrad``;
* ``<root>/metadatabundle/calibration`` (py4DSTEM's Calibration: ``R_pixel_size``,
  ``R_pixel_units``, ``Q_pixel_size``, ``Q_pixel_units``,
  ``convergence_semiangle_mrad``, ``voltage_kV``) and ``<root>/metadatabundle/livessb``
  (everything else: parameters, upsampling, method, what, units).

py4DSTEM reads a DataCube with its calibration (``py4DSTEM.read``); HyperSpy reads
the arrays with each axis' scale and units (``hs.load("x.emd")``: rosettasciio's
EMD reader); ``livessb.load`` reads the counts back with their calibration.
Writes are atomic (``livessb.atomic``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from numbers import Number
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ._version import __version__
from .atomic import atomic_write

if TYPE_CHECKING:
    from .dataset import Dataset4D
    from .results import Reconstruction

EMD_SUFFIXES: tuple[str, ...] = (".emd", ".h5", ".hdf5")
WHAT: tuple[str, ...] = ("phase", "object", "amplitude")
_ROWS_PER_WRITE_BYTES = 64 * 1024 * 1024


class EMDExportError(ValueError):
    """The EMD export cannot be done as asked; the message names the fix."""


def _check_target(path: str | Path) -> Path:
    target = Path(path).expanduser()
    if target.suffix.lower() not in EMD_SUFFIXES:
        raise EMDExportError(
            f"cannot write EMD to {target.name!r}: use a {', '.join(EMD_SUFFIXES)} suffix "
            "(HyperSpy picks its EMD reader from .emd)")
    return target


def _file_header(f: Any) -> None:
    f.attrs["emd_group_type"] = "file"
    f.attrs["version_major"] = 1
    f.attrs["version_minor"] = 0
    f.attrs["authoring_program"] = f"livessb {__version__}"
    f.attrs["authoring_user"] = ""
    f.attrs["UUID"] = str(uuid.uuid4())


def _tree(f: Any, name: str, python_class: str) -> tuple[Any, Any]:
    """File header, ``<name>_root``, its array group ``name`` and its metadata bundle."""
    _file_header(f)
    root = f.create_group(f"{name}_root")
    root.attrs["emd_group_type"] = "root"
    root.attrs["python_class"] = "Root"
    grp = root.create_group(name)
    grp.attrs["emd_group_type"] = "array"
    grp.attrs["python_class"] = python_class
    bundle = root.create_group("metadatabundle")
    bundle.attrs["emd_group_type"] = "metadatabundle"
    return grp, bundle


def _dims(group: Any, steps: list[tuple[str, float, str]]) -> None:
    for i, (name, step, units) in enumerate(steps):
        dim = group.create_dataset(f"dim{i}", data=np.array([0.0, float(step)]))
        dim.attrs["name"] = name
        dim.attrs["units"] = units


def _metadata_group(parent: Any, name: str, python_class: str,
                    items: Mapping[str, Any]) -> Any:
    """A Metadata group as emdfile writes it (one typed dataset per item)."""
    grp = parent.create_group(name)
    grp.attrs["emd_group_type"] = "metadata"
    grp.attrs["python_class"] = python_class
    for key, value in items.items():
        _item(grp, key, value)
    return grp


def _item(grp: Any, key: str, value: Any) -> None:
    if isinstance(value, Mapping):
        sub = grp.create_group(key)
        sub.attrs["type"] = "dict"
        for k, v in value.items():
            _item(sub, str(k), v)
    elif isinstance(value, str):
        grp.create_dataset(key, data=value.encode("utf-8")).attrs["type"] = b"string"
    elif isinstance(value, bool):
        grp.create_dataset(key, data=value, dtype=bool).attrs["type"] = b"bool"
    elif isinstance(value, Number):
        grp.create_dataset(key, data=value).attrs["type"] = b"number"
    elif isinstance(value, tuple | list):
        grp.create_dataset(key, data=np.asarray(value, dtype=np.float64)).attrs["type"] = \
            b"tuple"
    else:
        raise EMDExportError(f"metadata {key}={value!r} cannot be written to EMD")


def _calibration(parent: Any, items: Mapping[str, Any], target: str) -> None:
    grp = _metadata_group(parent, "calibration", "Calibration", items)
    # emdfile's bookkeeping: which objects of the tree this calibration belongs to.
    grp.create_dataset("_root_treepath", data=b"").attrs["type"] = b"string"
    paths = grp.create_group("_target_paths")
    paths.attrs["type"] = "list_of_strings"
    paths.attrs["length"] = 1
    paths.create_dataset("0", data=target.encode("utf-8"))


def _open(fh: Any) -> Any:
    """HDF5 needs to read back what it writes: open the atomic temporary file by name."""
    import h5py

    return h5py.File(fh.name, "w")


def save_dataset_emd(ds: Dataset4D, path: str | Path, name: str = "datacube",
                     compression: str | None = None) -> Path:
    """Write the counts ``(Rx, Ry, Qx, Qy)`` and calibration as a py4DSTEM DataCube."""
    target = _check_target(path)
    rows, cols, kr, kc = (int(s) for s in ds.counts.shape)
    step_r, step_c = ds.scan_step_A
    if not np.isclose(step_r, step_c):
        raise EMDExportError(
            f"the scan step {ds.scan_step_A} Å differs between rows and cols: py4DSTEM's "
            "Calibration holds one R_pixel_size; resample the scan to a square step first")
    with atomic_write(target) as fh, _open(fh) as f:
        grp, bundle = _tree(f, name, "DataCube")
        data = grp.create_dataset("data", shape=(rows, cols, kr, kc), dtype=ds.counts.dtype,
                                  chunks=(1, cols, kr, kc), compression=compression)
        data.attrs["units"] = "counts"
        batch = max(1, _ROWS_PER_WRITE_BYTES // max(cols * kr * kc * ds.counts.itemsize, 1))
        for r in range(0, rows, batch):  # bounded memory for memory-mapped counts
            data[r:r + batch] = np.asarray(ds.counts[r:r + batch])
        _dims(grp, [("Rx", step_r, "A"), ("Ry", step_c, "A"),
                    ("Qx", ds.detector_sampling_mrad, "mrad"),
                    ("Qy", ds.detector_sampling_mrad, "mrad")])
        _calibration(bundle, {
            "R_pixel_size": float(step_r), "R_pixel_units": "A",
            "Q_pixel_size": float(ds.detector_sampling_mrad), "Q_pixel_units": "mrad",
            "QR_flip": False, "convergence_semiangle_mrad": float(ds.semiangle_mrad),
            "voltage_kV": float(ds.voltage_kV)}, f"/{name}")
        _metadata_group(bundle, "livessb", "Metadata", {
            "software": f"livessb {__version__}", "what": "counts",
            "voltage_kV": float(ds.voltage_kV), "semiangle_mrad": float(ds.semiangle_mrad),
            "scan_step_A": (float(step_r), float(step_c)),
            "detector_sampling_mrad": float(ds.detector_sampling_mrad),
            "detector_sampling_derived": bool(ds.detector_sampling_derived)})
    return target


def save_reconstruction_emd(rec: Reconstruction, path: str | Path, what: str = "phase",
                            name: str | None = None, compression: str | None = None) -> Path:
    """Write the phase (rad, float32), amplitude or complex64 object as a 2D EMD array
    with its pixel size (Å) on both axes, and the parameters in ``metadatabundle/livessb``."""
    target = _check_target(path)
    if what not in WHAT:
        raise EMDExportError(f"what={what!r} is not one of {WHAT}")
    if what == "phase":
        data, units = np.ascontiguousarray(rec.phase, dtype=np.float32), "rad"
    elif what == "amplitude":
        data, units = np.ascontiguousarray(np.abs(rec.object), dtype=np.float32), "amplitude"
    else:
        data, units = np.ascontiguousarray(rec.object, dtype=np.complex64), "complex"
    name = name or what
    step_r, step_c = (float(s) for s in rec.sampling_A)
    with atomic_write(target) as fh, _open(fh) as f:
        grp, bundle = _tree(f, name, "Array")
        grp.create_dataset("data", data=data, compression=compression).attrs["units"] = units
        _dims(grp, [("R_x", step_r, "A"), ("R_y", step_c, "A")])
        _metadata_group(bundle, "livessb", "Metadata", {
            "software": f"livessb {__version__}", "what": what, "units": units,
            "pixel_size_A": (step_r, step_c), "upsample": int(rec.upsample),
            "method": str(rec.method),
            "origin_px": (int(rec.origin_px[0]), int(rec.origin_px[1])),
            "params": {str(k): float(v) for k, v in rec.params.items()}})
    return target

"""py4DSTEM / EMD 1.0 layout (HDF5 with ``emd_group_type`` data groups).

An EMD data group carries ``data`` plus one vector per axis (``dim1..dim4``, or
``dim0..dim3`` as written by ``emdfile``), each with ``name`` and ``units``
attributes. Linear dims may be stored as their first two values only.

Calibration read from it:

* scan step (Å) from the spacing of the two scan dims when their units are a
  length (``Å``/``A``/``nm``/``pm``/``m``); dims in pixels give nothing;
* detector sampling (mrad/px) from the spacing of the first detector dim when
  its units are an angle (``mrad``/``rad``), or from a reciprocal length
  (``1/Å``, ``A^-1``, ``1/nm``) once the voltage is known;
* voltage, semiangle and anything else from attributes of the data group, its
  parents, the root and metadata groups (``metadatabundle``, ``microscope``,
  ``calibration``...), see ``livessb.io.metadata`` for the keys.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import FileFormatError
from .h5 import describe_candidates, find_dataset, h5py_module, is_numeric_dataset
from .metadata import FileCalibration, normalise_unit, parse_attrs


def is_emd_group(obj: Any) -> bool:
    value = obj.attrs.get("emd_group_type") if "emd_group_type" in obj.attrs else None
    if value is None:
        return False
    if isinstance(value, bytes | np.bytes_):
        value = value.decode(errors="replace")
    if isinstance(value, str):
        return value.strip().lower() in ("1", "array", "datacube")
    try:
        return int(value) == 1
    except (TypeError, ValueError):
        return False


def emd_groups(f: Any) -> list[Any]:
    """EMD data groups holding a numeric 3D/4D ``data`` dataset."""
    h5py = h5py_module()
    out: list[Any] = []

    def visit(path: str, obj: Any) -> None:
        if isinstance(obj, h5py.Group) and is_emd_group(obj) and "data" in obj:
            data = obj["data"]
            if is_numeric_dataset(data) and data.ndim in (3, 4):
                out.append(obj)

    f.visititems(visit)
    return out


def choose_group(f: Any, dataset_path: str | None, name: str) -> Any:
    h5py = h5py_module()
    if dataset_path is not None:
        obj = f.get(dataset_path)
        if isinstance(obj, h5py.Dataset):
            return obj.parent
        if isinstance(obj, h5py.Group):
            return obj
        groups = emd_groups(f)
        raise FileFormatError(
            f"{name}: nothing at dataset_path={dataset_path!r}; EMD data groups: "
            f"{[g.name for g in groups] or 'none'}")
    groups = emd_groups(f)
    if not groups:
        # An HDF5 file without EMD groups: fall back to the generic search.
        return find_dataset(f, None, name).parent
    sizes = [int(np.prod(g["data"].shape)) for g in groups]
    best = max(sizes)
    top = [g for g, s in zip(groups, sizes, strict=True) if s == best]
    if len(top) > 1:
        raise FileFormatError(
            f"{name}: several EMD data groups could be the counts: "
            f"{describe_candidates([_candidate(g) for g in top])}"
            "; pass dataset_path='<group>'")
    return top[0]


def _candidate(group: Any) -> tuple[str, tuple[int, ...], str]:
    data = group["data"]
    return (group.name, tuple(data.shape), str(data.dtype))


def _dim(group: Any, index: int, zero_based: bool) -> Any:
    key = f"dim{index if zero_based else index + 1}"
    return group.get(key) if key in group else None


def dims_calibration(group: Any, ndim: int, where: str) -> FileCalibration:
    """Scan step and detector sampling from the dim vectors' spacing and units."""
    zero_based = "dim0" in group
    cal = FileCalibration()
    attrs: dict[str, Any] = {}
    spacing: list[tuple[float, str] | None] = []
    for i in range(ndim):
        d = _dim(group, i, zero_based)
        spacing.append(_spacing(d) if d is not None else None)
    if ndim == 4:
        scan = spacing[:2]
        det = spacing[2]
    else:  # 3D: (frames, kr, kc) -> only detector dims are meaningful
        scan = [None, None]
        det = spacing[1]
    if scan[0] is not None and scan[1] is not None and scan[0][1] == scan[1][1]:
        attrs["scan_step"] = [scan[0][0], scan[1][0]]
        attrs["scan_step_units"] = scan[0][1]
    if det is not None:
        attrs["detector_sampling"] = det[0]
        attrs["detector_sampling_units"] = det[1]
    try:
        parsed = parse_attrs(attrs, f"{where}/dims")
    except ValueError:
        return cal
    # Dims in pixels carry nothing; malformed dims are ignored rather than fatal.
    parsed.problems.clear()
    cal.update_missing(parsed)
    return cal


def _spacing(dim: Any) -> tuple[float, str] | None:
    try:
        values = np.asarray(dim[()], dtype=np.float64).reshape(-1)
    except Exception:
        return None
    if values.size < 2 or not np.isfinite(values[:2]).all():
        return None
    step = float(abs(values[1] - values[0]))
    if step <= 0:
        return None
    units = dim.attrs.get("units") if "units" in dim.attrs else None
    if units is None:
        return None
    return step, normalise_unit(units)


"""Other tools' objects as datasets: HyperSpy signals, rosettasciio dictionaries, py4DSTEM
DataCubes. Counts are taken as the tool shows them (no flip); calibration comes from
their axes and metadata (see ``docs/formats.md``):

* HyperSpy / rosettasciio: the array axes' ``scale`` and ``units`` (scan axes in a
  length → scan step in Å; detector axes in an angle or a reciprocal length → detector
  sampling in mrad/px; in a length → a detector pixel size, an angle with the camera
  length); ``Acquisition_instrument.TEM.beam_energy`` (keV), ``convergence_angle``
  (mrad) and ``camera_length`` (mm).
* py4DSTEM: ``calibration.get_R_pixel_size()/get_R_pixel_units()``,
  ``get_Q_pixel_size()/get_Q_pixel_units()``, ``get_convergence_semiangle_mrad()``, and a
  voltage from the calibration's or metadata's keys (``voltage``, ``beam_energy``,
  ``accelerating_voltage``…; a bare number above 1000 is volts).

The dataset class is passed in (``Dataset4D.from_hyperspy`` calls ``from_hyperspy(cls,
...)``): nothing here imports ``livessb.dataset``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ..dataset_base import DatasetError
from .build import build_dataset
from .metadata import FileCalibration, parse_attrs, resolve_calibration
from .quality import convert_counts, target_dtype

if TYPE_CHECKING:
    from ..dataset import Dataset4D

D = TypeVar("D", bound="Dataset4D")


@dataclass(frozen=True)
class Axis:
    """One array axis: spacing and units as the tool reports them."""

    scale: float | None
    units: str


def _units(value: Any) -> str:
    text = "" if value is None else str(value)
    return "" if text in ("<undefined>", "Undefined") else text


def axes_calibration(axes: Sequence[Axis], source: str) -> FileCalibration:
    """Scan step (4D only: axes 0, 1) and detector sampling (the last two axes)."""
    cal = FileCalibration()
    if len(axes) == 4:
        steps = [parse_attrs({"scan_step": (abs(a.scale), a.units)}, f"{source}:axis {i}")
                 for i, a in enumerate(axes[:2]) if a.scale]
        if len(steps) == 2 and steps[0].scan_step_A and steps[1].scan_step_A:
            cal.scan_step_A = (steps[0].scan_step_A[0], steps[1].scan_step_A[0])
            cal.sources["scan_step_A"] = f"{source}: scan axes' scale and units"
        for s in steps:
            cal.problems.update(s.problems)
    det = axes[-2:]
    if len(axes) >= 3 and all(a.scale for a in det) and det[0].units == det[1].units:
        scales = np.abs([float(a.scale or 0) for a in det])
        where = f"{source}: detector axes"
        sampling = parse_attrs({"detector_sampling": (scales, det[0].units)}, where)
        if sampling.problems:
            # A length on the detector (blockfile: cm on the screen) is a pixel size:
            # an angle only with the camera length.
            pixel = parse_attrs({"detector_pixel_size": (scales, det[0].units)}, where)
            if pixel.detector_pixel_size_A is not None:
                sampling = pixel
        cal.update_missing(sampling)
    return cal


def tem_calibration(metadata: Mapping[str, Any], source: str) -> FileCalibration:
    """HyperSpy's ``Acquisition_instrument.TEM``: beam_energy (keV), convergence_angle (mrad)."""
    tem = metadata.get("Acquisition_instrument", {})
    tem = tem.get("TEM", {}) if isinstance(tem, Mapping) else {}
    if not isinstance(tem, Mapping):
        return FileCalibration()
    attrs: dict[str, Any] = {}
    for key, unit in (("beam_energy", "keV"), ("convergence_angle", "mrad"),
                      ("camera_length", "mm")):
        value = tem.get(key)
        # Readers write 0 for "not recorded" (blockfile headers): that says nothing.
        if value is not None and not (_is_real(value) and float(value) == 0):
            attrs[key] = (value, unit)
    return parse_attrs(attrs, f"{source}:Acquisition_instrument.TEM")


def _is_real(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool)


def signal_dict_calibration(axes: Sequence[Mapping[str, Any]], metadata: Mapping[str, Any],
                            source: str) -> FileCalibration:
    """Calibration from a rosettasciio/HyperSpy dictionary's axes (array order) and metadata."""
    ordered = sorted(enumerate(axes), key=lambda ia: ia[1].get("index_in_array", ia[0]))
    cal = tem_calibration(metadata, source)
    cal.update_missing(axes_calibration(
        [Axis(a.get("scale"), _units(a.get("units"))) for _, a in ordered], source))
    return cal


def _hyperspy_parts(signal: Any) -> tuple[Any, FileCalibration, str]:
    try:
        am = signal.axes_manager
        axes = sorted([*am.navigation_axes, *am.signal_axes], key=lambda a: a.index_in_array)
        data = signal.data
        metadata = signal.metadata.as_dictionary()
    except AttributeError as exc:
        raise DatasetError(
            f"from_hyperspy needs a HyperSpy signal (data, axes_manager, metadata), got "
            f"{type(signal).__name__} ({exc})") from None
    title = str(metadata.get("General", {}).get("title") or "") or "signal"
    name = f"HyperSpy signal {title!r}"
    cal = tem_calibration(metadata, name)
    cal.update_missing(axes_calibration(
        [Axis(getattr(a, "scale", None), _units(a.units)) for a in axes], name))
    return data, cal, name


def _py4dstem_parts(datacube: Any) -> tuple[Any, FileCalibration, str]:
    cal_obj = getattr(datacube, "calibration", None)
    data = getattr(datacube, "data", None)
    if cal_obj is None or data is None:
        raise DatasetError(
            f"from_py4dstem needs a py4DSTEM DataCube (data, calibration), got "
            f"{type(datacube).__name__}")
    name = f"py4DSTEM DataCube {str(getattr(datacube, 'name', '') or '')!r}"
    attrs: dict[str, Any] = {}
    for getter, key in (("get_R_pixel_size", "R_pixel_size"), ("get_R_pixel_units",
                        "R_pixel_units"), ("get_Q_pixel_size", "Q_pixel_size"),
                        ("get_Q_pixel_units", "Q_pixel_units"),
                        ("get_convergence_semiangle_mrad", "convergence_semiangle_mrad")):
        fn = getattr(cal_obj, getter, None)
        value = fn() if callable(fn) else None
        if value is not None:
            attrs[key] = value
    for key in _keys(cal_obj):
        attrs.setdefault(key, cal_obj[key])
    for md in (getattr(datacube, "metadata", None) or {}).values():
        for key in _keys(md):
            attrs.setdefault(key, md[key])
    return data, parse_attrs(attrs, f"{name}.calibration"), name


def _keys(obj: Any) -> list[str]:
    keys = getattr(obj, "keys", None)
    keys = keys() if callable(keys) else keys
    try:
        return [str(k) for k in (keys or [])]
    except TypeError:
        return []


def build_from_array(cls: type[D], data: Any, file_cal: FileCalibration,
                     calibration: Mapping[str, Any], scan_shape: tuple[int, int] | None,
                     name: str) -> D:
    """``cls`` from an in-memory (or dask) array: dtype rules of the loader, user values win."""
    user = {k: v for k, v in calibration.items() if v is not None}
    arr = data if isinstance(data, np.ndarray) else np.asarray(data)
    if arr.ndim in (3, 4):
        # A 3D stack is converted as one scan row: a bad frame i is named (row 0, col i).
        as_4d = arr if arr.ndim == 4 else arr[None]
        arr = convert_counts(as_4d, target_dtype(arr.dtype, name), name, (0, 0)).reshape(
            arr.shape)
    kwargs = resolve_calibration(file_cal, user, name=name)
    # The shape checks (3D needs scan_shape, 4D otherwise) are the class's own.
    kwargs["scan_shape"] = scan_shape
    return build_dataset(cls, arr, kwargs, {**user, "scan_shape": scan_shape}, file_cal, name)


def from_hyperspy(cls: type[D], signal: Any, calibration: Mapping[str, Any],
                  scan_shape: tuple[int, int] | None = None) -> D:
    """A dataset from a HyperSpy 4D signal (lazy signals are computed)."""
    data, cal, name = _hyperspy_parts(signal)
    return build_from_array(cls, data, cal, calibration, scan_shape, name)


def from_py4dstem(cls: type[D], datacube: Any, calibration: Mapping[str, Any]) -> D:
    """A dataset from a py4DSTEM DataCube (axes R_x, R_y, Q_x, Q_y = rows, cols, kr, kc)."""
    data, cal, name = _py4dstem_parts(datacube)
    return build_from_array(cls, data, cal, calibration, None, name)

# ruff: noqa: N815, RUF100  (field names carry their units, like the rest of livessb)
"""Calibration metadata: parse what files carry, merge it with what the user passes.

Rules (see ``docs/formats.md``):

* metadata found in a file fills the calibration;
* a value the user passes always wins;
* whatever is still missing is left ``None`` so that :class:`~livessb.Dataset4D`
  raises its own clear "missing" error; a value the file carries but that cannot
  be understood raises a :class:`~livessb.DatasetError` naming the key, unless the
  user passed that quantity.

Everything here is pure Python: :func:`parse_attrs` accepts any mapping (HDF5
attributes, NPZ members, JSON) and returns either a :class:`FileCalibration` or
raises ``DatasetError``/``ValueError``; it never lets another exception escape.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..dataset_base import DatasetError
from ..physics.optics import wavelength_A

CALIBRATION_KEYS: tuple[str, ...] = (
    "voltage_kV", "semiangle_mrad", "scan_step_A", "detector_sampling_mrad")

# Physical constants for the energy <-> wavelength inversion (SI).
_H = 6.62607015e-34
_M0 = 9.1093837015e-31
_E = 1.602176634e-19
_C = 299792458.0

# Aliases (normalised: lower case, non-alphanumerics -> "_") for each quantity.
VOLTAGE_KEYS = (
    "voltage_kv", "voltage", "accelerating_voltage", "acceleration_voltage",
    "accelerating_voltage_kv", "high_tension", "ht", "beam_energy", "beam_energy_kev",
    "beam_energy_ev", "energy", "e0", "beam_voltage", "kv",
    # Dectris (Arina) masters: detectorSpecific/photon_energy is the beam energy in eV;
    # read before the wavelength (see resolve_calibration).
    "photon_energy")
WAVELENGTH_KEYS = ("wavelength", "incident_wavelength", "wavelength_a", "lambda")
SEMIANGLE_KEYS = (
    "semiangle_mrad", "convergence_semiangle", "convergence_semiangle_mrad",
    "convergence_semi_angle", "convergence_angle", "convergence_angle_mrad", "semiangle",
    "semi_angle", "probe_semiangle_mrad", "alpha", "alpha_mrad")
SCAN_STEP_KEYS = (
    "scan_step_a", "scan_step", "scan_step_size", "step_size", "r_pixel_size",
    "scan_pixel_size", "real_space_sampling", "probe_step", "scan_sampling")
SAMPLING_KEYS = (
    "detector_sampling_mrad", "detector_sampling", "q_pixel_size", "angular_sampling",
    "detector_pixel_mrad", "reciprocal_sampling", "k_sampling")
PIXEL_SIZE_KEYS = ("x_pixel_size", "detector_pixel_size", "pixel_size_detector")
DISTANCE_KEYS = ("detector_distance", "camera_length", "camera_length_m")

_KEY_DEFAULT_UNIT = {
    "voltage_kv": "kv", "accelerating_voltage_kv": "kv", "beam_energy_kev": "kv",
    "beam_energy_ev": "v", "kv": "kv", "photon_energy": "ev", "wavelength_a": "a",
    "scan_step_a": "a",
    "camera_length_m": "m", "convergence_semiangle_mrad": "mrad",
    "convergence_angle_mrad": "mrad", "probe_semiangle_mrad": "mrad", "alpha_mrad": "mrad",
    "detector_sampling_mrad": "mrad", "detector_pixel_mrad": "mrad", "semiangle_mrad": "mrad",
}

_LENGTH_A = {
    "a": 1.0, "å": 1.0, "angstrom": 1.0, "angstroms": 1.0, "ang": 1.0,
    "nm": 10.0, "nanometer": 10.0, "nanometers": 10.0, "pm": 0.01, "m": 1e10,
    "meter": 1e10, "meters": 1e10, "mm": 1e7, "um": 1e4, "µm": 1e4, "μm": 1e4,
    "micron": 1e4, "microns": 1e4, "cm": 1e8,
}
_ANGLE_MRAD = {
    "mrad": 1.0, "milliradian": 1.0, "milliradians": 1.0, "rad": 1e3, "radian": 1e3,
    "radians": 1e3, "urad": 1e-3, "µrad": 1e-3, "μrad": 1e-3,
    "deg": 1e3 * math.pi / 180, "degree": 1e3 * math.pi / 180,
    "degrees": 1e3 * math.pi / 180, "°": 1e3 * math.pi / 180,
}
_VOLTAGE_KV = {"kv": 1.0, "kev": 1.0, "v": 1e-3, "ev": 1e-3, "mv": 1e3, "mev": 1e3}
_RECIP_INV_A = {
    "1/a": 1.0, "a^-1": 1.0, "a-1": 1.0, "1/å": 1.0, "å^-1": 1.0, "å-1": 1.0,
    "1/angstrom": 1.0, "angstrom^-1": 1.0, "inv_a": 1.0,
    "1/nm": 0.1, "nm^-1": 0.1, "nm-1": 0.1, "1/m": 1e-10, "m^-1": 1e-10,
}
_NOT_PHYSICAL = {"pixels", "pixel", "px", "pix", "", "none", "n/a", "index", "a.u.", "1"}


@dataclass
class FileCalibration:
    """What a file's metadata says, in livessb units; ``None`` where it says nothing.

    ``problems`` maps a calibration key to a message about a value that was
    present but could not be used (the loader raises it unless the user passes
    that key). ``sources`` says where each value came from (for messages/docs).
    """

    voltage_kV: float | None = None
    wavelength_A: float | None = None
    semiangle_mrad: float | None = None
    scan_step_A: tuple[float, float] | None = None
    detector_sampling_mrad: float | None = None
    detector_sampling_inv_A: float | None = None
    detector_pixel_size_A: float | None = None
    detector_distance_A: float | None = None
    problems: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def update_missing(self, other: FileCalibration) -> None:
        """Fill the fields still ``None`` from ``other`` (self has priority)."""
        for name in ("voltage_kV", "wavelength_A", "semiangle_mrad", "scan_step_A",
                     "detector_sampling_mrad", "detector_sampling_inv_A",
                     "detector_pixel_size_A", "detector_distance_A"):
            if getattr(self, name) is None and getattr(other, name) is not None:
                setattr(self, name, getattr(other, name))
                if name in other.sources:
                    self.sources[name] = other.sources[name]
        for key, msg in other.problems.items():
            self.problems.setdefault(key, msg)

    def as_dict(self) -> dict[str, Any]:
        return {
            "voltage_kV": self.voltage_kV, "wavelength_A": self.wavelength_A,
            "semiangle_mrad": self.semiangle_mrad,
            "scan_step_A": list(self.scan_step_A) if self.scan_step_A else None,
            "detector_sampling_mrad": self.detector_sampling_mrad,
            "detector_sampling_inv_A": self.detector_sampling_inv_A,
            "detector_pixel_size_A": self.detector_pixel_size_A,
            "detector_distance_A": self.detector_distance_A,
            "problems": dict(self.problems), "sources": dict(self.sources),
        }


def normalise_key(key: Any) -> str:
    """``'Convergence Semi-Angle'`` -> ``'convergence_semi_angle'`` (last path part)."""
    text = _text(key)
    text = text.rsplit("/", 1)[-1]
    return re.sub(r"[^0-9a-zA-Zµμåé°]+", "_", text).strip("_").lower()


def _text(value: Any) -> str:
    if isinstance(value, bytes | bytearray | np.bytes_):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "SUO":
        return _text(value.reshape(-1)[0])
    return str(value)


def normalise_unit(unit: Any) -> str:
    """Lower case, no spaces; EMD's bracketed units ``"[n_m]"``, ``"[1_/_n_m]"`` (as
    ncempy and rosettasciio write them: one character or prefix per ``_`` part) are
    unwrapped to ``"nm"``, ``"1/nm"``."""
    text = _text(unit).strip()
    if len(text) > 2 and text.startswith("[") and text.endswith("]"):
        text = text[1:-1].replace("_", "")
    text = text.lower()
    text = text.replace("ångström", "angstrom").replace("Å".lower(), "å")
    text = text.replace(" ", "").replace("**", "^").replace("⁻¹", "^-1")
    return text


# A number, then an optional unit: one that starts with a non-digit, or a reciprocal
# written "1/…" (as in "0.01 1/A"; without that alternative the match backtracks to
# read "0" and the unit ".011/a").
_NUMBER_UNIT = re.compile(
    r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*((?:1/|[^\d\s]).*)?\s*$")


def numbers_and_unit(value: Any) -> tuple[list[float], str | None]:
    """Split a metadata value into finite-or-not floats and an optional unit string.

    Accepts numbers, NumPy scalars/arrays (1 or 2 elements), bytes/str such as
    ``"200 kV"`` or ``"0.5"`` and ``(value, unit)`` pairs. Raises ``ValueError``
    when it is not a number.
    """
    if isinstance(value, tuple) and len(value) == 2 and isinstance(
            value[1], str | bytes | np.bytes_ | np.str_):
        nums, unit = numbers_and_unit(value[0])
        return nums, normalise_unit(value[1]) if value[1] is not None else unit
    if value is None:
        raise ValueError("no value")
    if isinstance(value, bool | np.bool_):
        raise ValueError("a boolean is not a number")
    if isinstance(value, str | bytes | bytearray | np.str_ | np.bytes_):
        text = _text(value).strip()
        m = _NUMBER_UNIT.match(text)
        if m is None:
            raise ValueError(f"cannot read a number from {text[:40]!r}")
        unit = normalise_unit(m.group(2)) if m.group(2) else None
        return [float(m.group(1))], unit
    if isinstance(value, int | float | np.integer | np.floating):
        return [float(value)], None
    try:
        arr = np.asarray(value)
    except Exception as exc:  # arbitrary objects: report, never propagate
        raise ValueError(f"cannot read a number from {type(value).__name__}") from exc
    if arr.dtype.kind in "SUO":
        if arr.size == 1:
            item = arr.reshape(-1)[0]
            if item is value or isinstance(item, np.ndarray | list | tuple | dict):
                raise ValueError(f"cannot read a number from {type(value).__name__}")
            return numbers_and_unit(item)
        raise ValueError("an array of text is not a number")
    if arr.dtype.kind not in "iuf" or arr.size == 0 or arr.size > 2:
        raise ValueError(f"expected one or two numbers, got shape {arr.shape} {arr.dtype}")
    return [float(v) for v in arr.reshape(-1)], None


def _convert(nums: list[float], unit: str | None, table: Mapping[str, float],
             default: str | None) -> list[float] | None:
    """Values in the table's base unit; ``None`` if the unit is not physical (pixels)."""
    u = unit if unit is not None else default
    if u is None or u in _NOT_PHYSICAL:
        return None
    if u == "auto" and table is _VOLTAGE_KV:
        # A bare voltage above 1000 is read as volts (eV), otherwise as kV.
        nums = [v * 1e-3 if v > 1000 else v for v in nums]
        u = "kv"
    if u not in table:
        raise ValueError(f"unknown unit {u!r} (expected one of {sorted(table)})")
    out = [v * table[u] for v in nums]
    for v in out:
        if not math.isfinite(v) or v <= 0:
            raise ValueError(f"value {v!r} must be positive and finite")
    return out


def _unit_for(key: str, attrs: Mapping[str, Any]) -> str | None:
    """A separate units entry: ``key_units``, ``key_unit`` or ``*_size`` -> ``*_units``."""
    for cand in (f"{key}_units", f"{key}_unit", key.replace("_size", "_units"),
                 key.replace("_size", "_unit")):
        if cand != key and cand in attrs:
            try:
                return normalise_unit(attrs[cand])
            except Exception:  # pragma: no cover - str() of exotic objects
                return None
    return None


_Found = tuple[str, list[float]]  # (calibration field, its values)


def parse_attrs(attrs: Mapping[Any, Any], source: str = "metadata") -> FileCalibration:
    """Calibration from a flat mapping of metadata attributes (keys matched by alias).

    Never raises for bad values: they are recorded in ``problems`` and only
    raised (as ``DatasetError``) by :func:`resolve_calibration` if the user
    did not pass that quantity.
    """
    cal = FileCalibration()
    try:
        items = list(attrs.items())
    except Exception as exc:
        raise DatasetError(f"{source}: metadata is not a mapping ({exc})") from exc
    flat: dict[str, Any] = {}
    for k, v in items:
        try:
            nk = normalise_key(k)
        except Exception:  # pragma: no cover - str() of exotic key objects
            continue
        flat.setdefault(nk, v)

    def first(keys: Iterable[str], problem: str,
              convert: Callable[[str, list[float], str | None], _Found | None]) -> _Found | None:
        """The first key present whose value converts; failures are recorded as problems."""
        for key in keys:
            if key not in flat:
                continue
            where = f"{source}:{key}"
            try:
                nums, unit = numbers_and_unit(flat[key])
                if unit is None:
                    unit = _unit_for(key, flat)
                found = convert(key, nums, unit)
            except (ValueError, OverflowError, TypeError) as exc:
                cal.problems.setdefault(problem, f"{where} = {_short(flat[key])}: {exc}")
                continue
            if found is None:
                continue  # in pixels or unit-less index: not a physical calibration
            cal.sources[found[0]] = where
            return found
        return None

    def grab(keys: Iterable[str], target: str, table: Mapping[str, float],
             pair: bool = False) -> list[float] | None:
        def convert(key: str, nums: list[float], unit: str | None) -> _Found | None:
            if len(nums) == 2 and not pair:
                raise ValueError("expected a single number, got two")
            vals = _convert(nums, unit, table, _KEY_DEFAULT_UNIT.get(key, _default(target)))
            return None if vals is None else (target, vals)

        found = first(keys, target, convert)
        return None if found is None else found[1]

    def sampling(key: str, nums: list[float], unit: str | None) -> _Found | None:
        # Angle or reciprocal length, depending on the unit.
        if len(nums) == 2:
            if not math.isclose(nums[0], nums[1], rel_tol=1e-6):
                raise ValueError("different row/column detector sampling is not supported")
            nums = nums[:1]
        u = unit if unit is not None else _KEY_DEFAULT_UNIT.get(key, "mrad")
        if u in _RECIP_INV_A:
            target, vals = "detector_sampling_inv_A", _convert(nums, u, _RECIP_INV_A, None)
        else:
            target, vals = "detector_sampling_mrad", _convert(nums, u, _ANGLE_MRAD, None)
        return None if vals is None else (target, vals)

    v = grab(VOLTAGE_KEYS, "voltage_kV", _VOLTAGE_KV)
    if v is not None:
        cal.voltage_kV = v[0]
    v = grab(WAVELENGTH_KEYS, "wavelength_A", _LENGTH_A)
    if v is not None:
        cal.wavelength_A = v[0]
    v = grab(SEMIANGLE_KEYS, "semiangle_mrad", _ANGLE_MRAD)
    if v is not None:
        cal.semiangle_mrad = v[0]
    v = grab(SCAN_STEP_KEYS, "scan_step_A", _LENGTH_A, pair=True)
    if v is not None:
        cal.scan_step_A = (v[0], v[-1])
    found = first(SAMPLING_KEYS, "detector_sampling_mrad", sampling)
    if found is not None:
        setattr(cal, found[0], found[1][0])
    v = grab(PIXEL_SIZE_KEYS, "detector_pixel_size_A", _LENGTH_A, pair=True)
    if v is not None:
        cal.detector_pixel_size_A = v[0]
    v = grab(DISTANCE_KEYS, "detector_distance_A", _LENGTH_A)
    if v is not None:
        cal.detector_distance_A = v[0]
    return cal


def _default(target: str) -> str | None:
    # Bare numbers: Å for lengths, mrad for angles; voltage decided by magnitude.
    return {"wavelength_A": "a", "semiangle_mrad": "mrad", "scan_step_A": "a",
            "detector_pixel_size_A": "m", "detector_distance_A": "m",
            "voltage_kV": "auto"}.get(target)


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # pragma: no cover
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def voltage_from_wavelength(wavelength: float) -> float:
    """Inverse of the relativistic wavelength: beam energy in kV from λ in Å."""
    if not (math.isfinite(wavelength) and wavelength > 0):
        raise ValueError(f"wavelength must be positive and finite, got {wavelength!r}")
    try:
        p = _H / (wavelength * 1e-10)
        # (eV)^2/c^2 + 2 m0 (eV) - p^2 = 0  ->  eV = c^2 (sqrt(m0^2 + p^2/c^2) - m0)
        kv = _C**2 * (math.sqrt(_M0**2 + (p / _C) ** 2) - _M0) / _E / 1e3
    except (OverflowError, ZeroDivisionError):  # λ so small that p² overflows
        kv = math.inf
    if not (math.isfinite(kv) and kv > 0):
        raise ValueError(f"wavelength {wavelength!r} Å gives no finite, positive beam energy")
    return kv


def resolve_calibration(
    file_cal: FileCalibration | None, user: Mapping[str, Any] | None = None,
    *, name: str = "the file",
) -> dict[str, Any]:
    """``Dataset4D`` keyword arguments: the user's values win, the file's fill in.

    Keys the user may pass: ``voltage_kV``, ``semiangle_mrad``, ``scan_step_A``,
    ``detector_sampling_mrad``. Unknown keys raise ``DatasetError``. Values still
    missing stay ``None`` (``Dataset4D`` says what to pass). File values that were
    present but unusable raise ``DatasetError`` unless the user passed that key.
    Derived only when derivable: voltage from the wavelength; detector sampling
    from a reciprocal sampling (needs the voltage) or from pixel size / distance.
    """
    user = dict(user or {})
    unknown = sorted(set(user) - set(CALIBRATION_KEYS))
    if unknown:
        raise DatasetError(
            f"unknown calibration keyword(s) {unknown}: pass only "
            f"{', '.join(CALIBRATION_KEYS)}")
    fc = file_cal if file_cal is not None else FileCalibration()
    out: dict[str, Any] = {k: user.get(k) for k in CALIBRATION_KEYS}

    def problem(key: str) -> None:
        if key in fc.problems:
            raise DatasetError(
                f"{name}: could not use the {key} found in its metadata ({fc.problems[key]}); "
                f"pass {key}=... to override it")

    if out["voltage_kV"] is None:
        if fc.voltage_kV is not None:
            out["voltage_kV"] = fc.voltage_kV
        elif fc.wavelength_A is not None:
            try:
                out["voltage_kV"] = voltage_from_wavelength(fc.wavelength_A)
            except ValueError as exc:
                raise DatasetError(
                    f"{name}: could not derive voltage_kV from the wavelength in its "
                    f"metadata ({exc}); pass voltage_kV=... to override it") from None
        else:
            problem("voltage_kV")
    if out["semiangle_mrad"] is None:
        if fc.semiangle_mrad is not None:
            out["semiangle_mrad"] = fc.semiangle_mrad
        else:
            problem("semiangle_mrad")
    if out["scan_step_A"] is None:
        if fc.scan_step_A is not None:
            out["scan_step_A"] = fc.scan_step_A
        else:
            problem("scan_step_A")
    if out["detector_sampling_mrad"] is None:
        if fc.detector_sampling_mrad is not None:
            out["detector_sampling_mrad"] = fc.detector_sampling_mrad
        elif fc.detector_sampling_inv_A is not None and _is_number(out["voltage_kV"]):
            lam = wavelength_A(float(out["voltage_kV"]))
            out["detector_sampling_mrad"] = fc.detector_sampling_inv_A * lam * 1e3
        elif fc.detector_pixel_size_A is not None and fc.detector_distance_A is not None:
            out["detector_sampling_mrad"] = (
                fc.detector_pixel_size_A / fc.detector_distance_A * 1e3)
        else:
            problem("detector_sampling_mrad")
        # Missing detector sampling is fine: Dataset4D derives it from the BF disk.
    for key in ("voltage_kV", "semiangle_mrad", "detector_sampling_mrad"):
        val = out[key]
        if val is not None and _is_number(val) and not (
                math.isfinite(float(val)) and float(val) > 0):
            raise DatasetError(f"{name}: {key}={val!r} must be positive and finite")
    return out


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError, OverflowError):
        return False
    return True

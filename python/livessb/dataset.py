"""Dataset4D: counts plus the calibration SSB needs, validated on construction."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .dataset_base import SUPPORTED_DTYPES as SUPPORTED_DTYPES
from .dataset_base import DatasetError as DatasetError
from .mapped_pages import release_pages
from .physics.bright_field import BrightFieldError, estimate_disk
from .physics.optics import wavelength_A
from .plausible import implausibility, unusual_allowed


class ImplausibleCalibrationError(DatasetError):
    """A calibration value outside its plausible range: probably the wrong unit."""


def _plausible(name: str, value: float, allow: bool) -> float:
    problem = None if allow else implausibility(name, value)
    if problem is not None:
        raise ImplausibleCalibrationError(problem)
    return value


def _positive(name: str, value: Any, hint: str) -> float:
    if value is None:
        raise DatasetError(f"{name} is missing: {hint}")
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise DatasetError(f"{name} must be a number, got {value!r}") from exc
    if not math.isfinite(v) or v <= 0:
        raise DatasetError(f"{name} must be positive and finite, got {value!r}")
    return v


@dataclass(frozen=True)
class BrightField:
    """Bright-field disk measured on the mean pattern (detector pixels)."""

    center_row: float
    center_col: float
    radius_px: float


def measure_bright_field(mean_pattern: np.ndarray) -> BrightField:
    """Centre and radius of the BF disk, robust to hot/dead pixels (physics.bright_field)."""
    try:
        disk = estimate_disk(mean_pattern)
    except BrightFieldError as exc:
        raise DatasetError(str(exc)) from None
    return BrightField(center_row=disk.center_row, center_col=disk.center_col,
                       radius_px=disk.radius_px)


# How a detector samples the pattern: a camera's pixels integrate over their area, a
# simulator's output is the intensity at each pixel's centre.
DETECTOR_PIXELS = ("integrating", "points")


def check_detector_pixels(value: object) -> str:
    if value not in DETECTOR_PIXELS:
        raise DatasetError(
            f"detector_pixels={value!r}: use \"integrating\" for a camera's counts (each "
            f"pixel sums its area) or \"points\" for a simulator's output (the intensity "
            f"at each pixel's centre)")
    return str(value)


class Dataset4D:
    """4D-STEM counts ``I[Rr, Rc, kr, kc]`` with voltage, semiangle, scan step and sampling.

    ``scan_step_A`` is a scalar or a ``(row, col)`` pair. ``detector_sampling_mrad``
    (mrad per detector pixel) is derived from the BF disk radius when omitted.
    Three-dimensional counts ``(positions, kr, kc)`` need ``scan_shape``.
    Values outside plausible ranges (``livessb.plausible.RANGES``: probably a unit
    mistake) are refused unless ``allow_unusual=True``. ``detector_pixels``: "integrating"
    (a camera's pixels sum the intensity over their area) or "points" (a simulator's
    output, the intensity at each pixel's centre); crystal mode models what it is told
    (``DETECTOR_PIXELS``).
    """

    _detector_pixels = "integrating"

    def __init__(
        self,
        counts: Any,
        voltage_kV: float | None = None,
        semiangle_mrad: float | None = None,
        scan_step_A: float | tuple[float, float] | None = None,
        detector_sampling_mrad: float | None = None,
        scan_shape: tuple[int, int] | None = None,
        allow_unusual: bool | None = None,
        detector_pixels: str = "integrating",
    ) -> None:
        self.detector_pixels = detector_pixels
        self.counts = _validated_counts(counts, scan_shape)
        self._calibrate(voltage_kV, semiangle_mrad, scan_step_A, detector_sampling_mrad,
                        lambda: _mean_pattern(self.counts), allow_unusual)

    def _calibrate(
        self, voltage_kV: float | None, semiangle_mrad: float | None,
        scan_step_A: float | tuple[float, float] | None, detector_sampling_mrad: float | None,
        mean_pattern: Callable[[], np.ndarray], allow_unusual: bool | None = None,
    ) -> None:
        """Calibration checks, the mean pattern and the BF disk: every counts store's
        (host here, device in ``livessb.bench.device_data``) validation after its counts."""
        self.allow_unusual = unusual = unusual_allowed(allow_unusual)
        self.voltage_kV = _plausible("voltage_kV", _positive(
            "voltage_kV", voltage_kV, "pass the beam energy, e.g. voltage_kV=200"), unusual)
        self.semiangle_mrad = _plausible("semiangle_mrad", _positive(
            "semiangle_mrad", semiangle_mrad,
            "pass the probe convergence semiangle, e.g. semiangle_mrad=20"), unusual)
        step = _scan_step(scan_step_A)
        self.scan_step_A = (_plausible("scan_step_A", step[0], unusual),
                            _plausible("scan_step_A", step[1], unusual))
        self.wavelength_A = wavelength_A(self.voltage_kV)
        self.mean_pattern = mean_pattern()
        self.bright_field = measure_bright_field(self.mean_pattern)
        if detector_sampling_mrad is None:
            self.detector_sampling_mrad = self.semiangle_mrad / self.bright_field.radius_px
            self.detector_sampling_derived = True
        else:
            self.detector_sampling_mrad = _plausible("detector_sampling_mrad", _positive(
                "detector_sampling_mrad", detector_sampling_mrad,
                "or leave it None to derive it"), unusual)
            self.detector_sampling_derived = False
        self._check_disk_fits()

    @classmethod
    def from_hyperspy(cls, signal: Any, scan_shape: tuple[int, int] | None = None,
                      **calibration: Any) -> Dataset4D:
        """From a HyperSpy 4D signal: scan step and detector sampling from its axes'
        scale/units, voltage and semiangle from ``Acquisition_instrument.TEM``; keywords
        (``voltage_kV`` …) win. See ``livessb.io.foreign``."""
        from .io.foreign import from_hyperspy

        return from_hyperspy(cls, signal, calibration, scan_shape)

    @classmethod
    def from_py4dstem(cls, datacube: Any, **calibration: Any) -> Dataset4D:
        """From a py4DSTEM DataCube: R/Q pixel sizes and units, semiangle and voltage from
        its calibration (keywords win; pass what it lacks). See ``livessb.io.foreign``."""
        from .io.foreign import from_py4dstem

        return from_py4dstem(cls, datacube, calibration)

    @property
    def scan_shape(self) -> tuple[int, int]:
        return (int(self.counts.shape[0]), int(self.counts.shape[1]))

    @property
    def detector_shape(self) -> tuple[int, int]:
        return (int(self.counts.shape[2]), int(self.counts.shape[3]))

    @property
    def k_alpha(self) -> float:
        """Aperture radius in 1/Å."""
        return self.semiangle_mrad * 1e-3 / self.wavelength_A

    @property
    def detector_pixels(self) -> str:
        """"integrating" or "points": how the detector samples the pattern."""
        return self._detector_pixels

    @detector_pixels.setter
    def detector_pixels(self, value: str) -> None:
        self._detector_pixels = check_detector_pixels(value)

    @property
    def detector_pixel_inv_A(self) -> float:
        """Detector pixel size in 1/Å."""
        return self.detector_sampling_mrad * 1e-3 / self.wavelength_A

    def calibration(self) -> dict[str, Any]:
        return {
            "voltage_kV": self.voltage_kV,
            "semiangle_mrad": self.semiangle_mrad,
            "scan_step_A": list(self.scan_step_A),
            "detector_sampling_mrad": self.detector_sampling_mrad,
        }

    def signature(self) -> dict[str, Any]:
        """What identifies the dataset in calibration files: shape, dtype, calibration, hash."""
        return {
            "shape": list(self.counts.shape),
            "dtype": str(self.counts.dtype),
            "calibration": self.calibration(),
            "content_sha256": self._content_sha256(),
        }

    def _content_sha256(self) -> str:
        # Counts are fixed at construction: hash the sampled frames once, not per fit.
        cached = self.__dict__.get("_content_hash")
        if cached is None:
            cached = self.__dict__["_content_hash"] = content_hash(self.counts)
        return str(cached)

    def _check_disk_fits(self) -> None:
        bf = self.bright_field
        radius = self.semiangle_mrad / self.detector_sampling_mrad
        kr, kc = self.detector_shape
        margin = min(bf.center_row, bf.center_col, kr - 1 - bf.center_row, kc - 1 - bf.center_col)
        if radius > margin + 0.5:
            raise DatasetError(
                f"the BF disk (radius {radius:.1f} px at centre ({bf.center_row:.1f}, "
                f"{bf.center_col:.1f})) does not fit on the {kr}x{kc} detector: check "
                "semiangle_mrad and detector_sampling_mrad, or use a larger detector crop")
        if radius < 2:
            raise DatasetError(
                f"the BF disk is only {radius:.2f} px in radius: too few BF pixels for SSB; "
                "check detector_sampling_mrad or avoid binning the detector")

    def __repr__(self) -> str:
        return (f"Dataset4D(shape={self.counts.shape}, dtype={self.counts.dtype}, "
                f"{self.voltage_kV:g} kV, {self.semiangle_mrad:g} mrad, "
                f"step={self.scan_step_A} Å, {self.detector_sampling_mrad:.4g} mrad/px)")


def _validated_counts(counts: Any, scan_shape: tuple[int, int] | None) -> np.ndarray:
    if not hasattr(counts, "shape") or not hasattr(counts, "dtype"):
        counts = np.asarray(counts)
    if counts.ndim == 3:
        if scan_shape is None:
            raise DatasetError(
                f"counts are 3D {tuple(counts.shape)}: pass scan_shape=(rows, cols) "
                "so the positions can be arranged on the scan grid")
        rows, cols = (int(s) for s in scan_shape)
        if rows * cols != counts.shape[0]:
            raise DatasetError(
                f"scan_shape {scan_shape} holds {rows * cols} positions but the counts "
                f"have {counts.shape[0]}")
        counts = counts.reshape(rows, cols, *counts.shape[1:])
    elif counts.ndim != 4:
        raise DatasetError(
            f"counts must be 4D (scan rows, scan cols, detector rows, detector cols) "
            f"or 3D with scan_shape; got {counts.ndim}D {tuple(counts.shape)}")
    if counts.dtype not in SUPPORTED_DTYPES:
        raise DatasetError(
            f"counts dtype {counts.dtype} is not supported: use uint8, uint16, uint32 "
            "or float32 (e.g. counts.astype(np.float32))")
    if min(counts.shape[:2]) < 1:
        raise DatasetError(f"the scan {tuple(counts.shape[:2])} is empty: it needs at least "
                           "one scan position (the fit needs 4x4: livessb.regions)")
    if min(counts.shape[2:]) < 8:
        raise DatasetError(
            f"the detector {tuple(counts.shape[2:])} is too small: need at least 8x8 pixels")
    if counts.dtype == np.float32:
        _check_float_counts(counts)
    return counts


def _check_float_counts(counts: np.ndarray) -> None:
    # Chunked over scan rows so memory-mapped input is never fully loaded.
    for r in range(counts.shape[0]):
        row = np.asarray(counts[r])
        if not np.isfinite(row).all():
            raise DatasetError(
                f"counts contain NaN or inf (first in scan row {r}): replace or mask "
                "those frames before building a Dataset4D")
        if (row < 0).any():
            raise DatasetError(
                f"counts contain negative values (first in scan row {r}): subtract the "
                "dark level with clipping at zero, or pass raw counts")
        release_pages(counts[r])


def _scan_step(step: Any) -> tuple[float, float]:
    if step is None:
        raise DatasetError("scan_step_A is missing: pass the probe step, e.g. scan_step_A=0.6")
    if np.ndim(step) == 0:
        v = _positive("scan_step_A", step, "")
        return (v, v)
    vals = list(np.asarray(step, dtype=float).ravel())
    if len(vals) != 2:
        raise DatasetError(f"scan_step_A must be a scalar or (row, col), got {step!r}")
    return (_positive("scan_step_A[row]", vals[0], ""), _positive("scan_step_A[col]", vals[1], ""))


def _mean_pattern(counts: np.ndarray) -> np.ndarray:
    # Accumulate row by row in float64: exact order, bounded memory for memmaps (whose
    # pages are released behind each row).
    acc = np.zeros(counts.shape[2:], dtype=np.float64)
    for r in range(counts.shape[0]):
        acc += np.asarray(counts[r], dtype=np.float64).sum(axis=0)
        release_pages(counts[r])
    return acc / (counts.shape[0] * counts.shape[1])


def content_hash(counts: np.ndarray, samples: int = 64) -> str:
    """SHA-256 over a fixed sample of frames (corners, centre, a strided set)."""
    rows, cols = counts.shape[:2]
    idx = np.linspace(0, rows * cols - 1, num=min(samples, rows * cols)).astype(np.int64)
    h = hashlib.sha256()
    h.update(str(counts.shape).encode())
    h.update(str(counts.dtype).encode())
    for i in idx:
        h.update(np.ascontiguousarray(counts[i // cols, i % cols]).tobytes())
    return h.hexdigest()

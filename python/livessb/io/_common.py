"""Shared loader machinery: errors, scan geometry, chunked streaming, quality checks."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..dataset import SUPPORTED_DTYPES, Dataset4D, DatasetError, measure_bright_field
from . import binning
from .metadata import FileCalibration, resolve_calibration

Region = tuple[int, int, int, int]
# Bytes per streamed read: large enough to amortise per-call overhead, small enough
# to keep peak memory low next to the output array.
TARGET_CHUNK_BYTES = 64 * 1024 * 1024


class FileFormatError(DatasetError):
    """The file is readable but not laid out as expected (or ambiguous); names the fix."""


class CorruptFileError(DatasetError, OSError):
    """The file is truncated, corrupt or missing a part (an ``OSError`` and a ``DatasetError``)."""


class UnsupportedFormatError(FileFormatError):
    """The suffix or file variant is not supported; the message says how to convert."""


@dataclass
class LoadOptions:
    scan_shape: tuple[int, int] | None = None
    scan_region: Region | None = None
    bin_detector: int | None = None
    crop_to_bf: bool | int = False
    progress: bool = True
    calibration: dict[str, Any] = field(default_factory=dict)


@dataclass
class QualityStats:
    """Accumulated over every frame read; warnings are issued once, at the end."""

    integer_max: int | None
    pixels: int = 0
    saturated: int = 0
    frame_alive: np.ndarray | None = None  # (rows, cols) bool: frame has any counts

    def warn(self, name: str, offset: tuple[int, int]) -> None:
        if self.saturated:
            frac = self.saturated / max(self.pixels, 1)
            warnings.warn(
                f"{name}: {frac:.3%} of detector pixels ({self.saturated} of {self.pixels}) sit "
                f"at the dtype maximum {self.integer_max} (saturated or masked): the counts there "
                "are clipped; SSB still runs, but check the exposure or mask those pixels",
                stacklevel=4)
        if self.frame_alive is None:
            return
        dead_rows = [int(r) + offset[0] for r in np.nonzero(~self.frame_alive.any(axis=1))[0]]
        if dead_rows and len(dead_rows) < self.frame_alive.shape[0]:
            warnings.warn(
                f"{name}: scan row(s) {_short_list(dead_rows)} have zero counts in every frame "
                "(dead rows). They are loaded as zeros and act as missing signal in SSB; "
                "use scan_region=(r0, r1, c0, c1) to exclude them if they spoil the result",
                stacklevel=4)
        dead_cols = [int(c) + offset[1] for c in np.nonzero(~self.frame_alive.any(axis=0))[0]]
        if dead_cols and len(dead_cols) < self.frame_alive.shape[1]:
            warnings.warn(
                f"{name}: scan column(s) {_short_list(dead_cols)} have zero counts in every "
                "frame (dead columns). They are loaded as zeros; use scan_region to exclude them",
                stacklevel=4)


def _short_list(items: list[int], n: int = 8) -> str:
    return str(items) if len(items) <= n else f"{items[:n]}... ({len(items)} in all)"


class ScanSource:
    """Frames of a file arranged on the scan grid; reads rectangular blocks.

    ``array`` is anything sliceable along its leading axes with ``.shape`` and
    ``.dtype`` (NumPy array/memmap, ``h5py.Dataset``, a frame concatenation):
    4D ``(rows, cols, kr, kc)`` or 3D ``(frames, kr, kc)`` with ``scan_shape``.
    """

    def __init__(self, array: Any, scan_shape: tuple[int, int] | None, name: str) -> None:
        self.array = array
        self.name = name
        shape = tuple(int(s) for s in array.shape)
        self.dtype = np.dtype(array.dtype)
        if len(shape) == 4:
            self.frames_3d = False
            if scan_shape is not None and tuple(int(s) for s in scan_shape) != shape[:2]:
                raise DatasetError(
                    f"{name}: scan_shape={tuple(scan_shape)} does not match the file's 4D "
                    f"scan {shape[:2]}: leave scan_shape out (4D files carry their scan shape)")
            self.scan_shape = (shape[0], shape[1])
        elif len(shape) == 3:
            self.frames_3d = True
            if scan_shape is None:
                raise DatasetError(
                    f"{name}: the data are 3D {shape} (a stack of {shape[0]} frames): pass "
                    "scan_shape=(rows, cols) with rows*cols == the number of frames")
            try:
                rows, cols = (int(s) for s in scan_shape)
            except (TypeError, ValueError) as exc:
                raise DatasetError(
                    f"scan_shape must be (rows, cols), got {scan_shape!r}") from exc
            if rows <= 0 or cols <= 0 or rows * cols != shape[0]:
                hint = _divisor_hint(shape[0], cols)
                raise DatasetError(
                    f"{name}: scan_shape=({rows}, {cols}) needs {rows * cols} frames but the file "
                    f"has {shape[0]}: pass a scan_shape whose rows*cols == {shape[0]}{hint}")
            self.scan_shape = (rows, cols)
        else:
            raise FileFormatError(
                f"{name}: the data are {len(shape)}D {shape}; 4D-STEM needs 4D (scan rows, scan "
                "cols, detector rows, detector cols) or 3D (frames, detector rows, detector cols)")
        self.detector_shape = (shape[-2], shape[-1])
        if self.dtype.kind not in "uif" and self.dtype.kind != "b":
            raise DatasetError(
                f"{name}: counts of dtype {self.dtype} are not numeric counts: store them as "
                "uint8/uint16/uint32 or float32")

    def read(self, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        """Counts of scan rows r0:r1, cols c0:c1, shape (r1-r0, c1-c0, kr, kc)."""
        kr, kc = self.detector_shape
        if not self.frames_3d:
            return np.asarray(self.array[r0:r1, c0:c1])
        cols = self.scan_shape[1]
        if c0 == 0 and c1 == cols:
            block = np.asarray(self.array[r0 * cols:r1 * cols])
            return block.reshape(r1 - r0, cols, kr, kc)
        out = np.empty((r1 - r0, c1 - c0, kr, kc), dtype=self.dtype)
        for i, r in enumerate(range(r0, r1)):
            out[i] = np.asarray(self.array[r * cols + c0:r * cols + c1])
        return out

    def read_frame(self, r: int, c: int) -> np.ndarray:
        if self.frames_3d:
            i = r * self.scan_shape[1] + c
            return np.asarray(self.array[i:i + 1])[0]
        return np.asarray(self.array[r:r + 1, c:c + 1])[0, 0]


def _divisor_hint(n: int, cols: int) -> str:
    if cols > 0 and n % cols == 0:
        return f", e.g. ({n // cols}, {cols})"
    root = math.isqrt(n)
    if root * root == n:
        return f", e.g. ({root}, {root})"
    return ""


def check_region(region: Any, scan_shape: tuple[int, int], name: str) -> Region:
    rows, cols = scan_shape
    if region is None:
        return (0, rows, 0, cols)
    try:
        r0, r1, c0, c1 = (int(v) for v in region)
    except (TypeError, ValueError) as exc:
        raise DatasetError(
            f"scan_region must be (row_start, row_stop, col_start, col_stop), got {region!r}"
        ) from exc
    if not (0 <= r0 < r1 <= rows and 0 <= c0 < c1 <= cols):
        raise DatasetError(
            f"{name}: scan_region=({r0}, {r1}, {c0}, {c1}) is empty or outside the "
            f"{rows}x{cols} scan: use 0 <= row_start < row_stop <= {rows} and "
            f"0 <= col_start < col_stop <= {cols} (stops exclusive)")
    return (r0, r1, c0, c1)


def target_dtype(dtype: np.dtype, name: str) -> np.dtype:
    """Dtype the counts are stored in: the file's own when supported, else documented rules."""
    dtype = np.dtype(dtype)
    native = dtype.newbyteorder("=")
    for t in SUPPORTED_DTYPES:
        if native == np.dtype(t):
            return np.dtype(t)
    if dtype.kind == "b" or native == np.dtype(np.int8):
        return np.dtype(np.uint8)
    if native == np.dtype(np.int16):
        return np.dtype(np.uint16)
    if dtype.kind in "iu":
        return np.dtype(np.uint32)
    if dtype.kind == "f":
        return np.dtype(np.float32)
    raise DatasetError(f"{name}: counts of dtype {dtype} cannot be used: store numeric counts")


def _convert(block: np.ndarray, dtype: np.dtype, name: str, where: tuple[int, int]) -> np.ndarray:
    if block.dtype == dtype:
        return block
    if block.dtype.kind == "i" and block.size and int(block.min()) < 0:
        idx = np.unravel_index(int(np.argmin(block.reshape(block.shape[0], block.shape[1], -1)
                                             .min(axis=2))), block.shape[:2])
        raise DatasetError(
            f"{name}: negative counts in frame (row {idx[0] + where[0]}, col "
            f"{idx[1] + where[1]}): subtract the dark level with clipping at zero, or pass raw "
            "counts")
    if dtype.kind == "u" and block.dtype.kind in "iu" and block.size:
        if int(block.max()) > np.iinfo(dtype).max:
            raise DatasetError(
                f"{name}: counts up to {int(block.max())} do not fit in {dtype}: rescale them "
                "or save them as float32")
    return block.astype(dtype)


def _check_block(block: np.ndarray, stats: QualityStats, name: str,
                 where: tuple[int, int], local: tuple[int, int]) -> None:
    """Non-finite frames raise (naming the frame); saturation and dead frames are counted."""
    frames = block.reshape(block.shape[0], block.shape[1], -1)
    if block.dtype.kind == "f":
        finite = np.isfinite(frames)
        bad = ~finite.all(axis=2)
        if bad.any():
            r, c = (int(v) for v in np.argwhere(bad)[0])
            n_bad = int((~finite[r, c]).sum())
            what = ("is all NaN/inf" if n_bad == frames.shape[2]
                    else f"has {n_bad} NaN/inf pixel(s)")
            raise DatasetError(
                f"{name}: frame (scan row {r + where[0]}, col {c + where[1]}) {what}: replace "
                "it (e.g. with the mean of its neighbours) or load a scan_region that excludes "
                "it")
        if (frames < 0).any():
            r, c = (int(v) for v in np.argwhere((frames < 0).any(axis=2))[0])
            raise DatasetError(
                f"{name}: negative counts in frame (scan row {r + where[0]}, col {c + where[1]})"
                ": subtract the dark level with clipping at zero, or pass raw counts")
    if stats.integer_max is not None:
        stats.saturated += int(np.count_nonzero(frames == stats.integer_max))
    stats.pixels += frames.size
    if stats.frame_alive is not None:
        lr, lc = local
        stats.frame_alive[lr:lr + block.shape[0], lc:lc + block.shape[1]] = frames.any(axis=2)


def _row_batches(r0: int, r1: int, row_bytes: int) -> list[tuple[int, int]]:
    step = max(1, TARGET_CHUNK_BYTES // max(row_bytes, 1))
    return [(r, min(r + step, r1)) for r in range(r0, r1, step)]


def _progress(total: int, desc: str, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="row", disable=not enabled, leave=False)


def _bf_window(source: ScanSource, region: Region, factor: int,
               margin: int | None) -> tuple[int, int, int, int]:
    """Detector crop around the BF disk, measured on a sample of frames of the region."""
    r0, r1, c0, c1 = region
    positions = (r1 - r0) * (c1 - c0)
    idx = np.unique(np.linspace(0, positions - 1, num=min(64, positions)).astype(np.int64))
    acc: np.ndarray | None = None
    for i in idx:
        r, c = r0 + int(i) // (c1 - c0), c0 + int(i) % (c1 - c0)
        frame = np.asarray(source.read_frame(r, c), dtype=np.float64)
        if not np.isfinite(frame).all():
            continue  # reported with its position by the streaming pass
        acc = frame if acc is None else acc + frame
    if acc is None:
        raise DatasetError(f"{source.name}: no finite frames to locate the BF disk")
    acc = binning.bin_frames(acc[None, None], factor)[0, 0] if factor > 1 else acc
    bf = measure_bright_field(acc)
    return binning.bf_crop_window(bf, acc.shape, margin)


def stream_dataset(
    source: ScanSource, opts: LoadOptions, file_cal: FileCalibration | None,
    *, allow_view: bool = False,
) -> Dataset4D:
    """Read the region in row batches (progress bar), bin/crop when asked, check, build."""
    name = source.name
    region = check_region(opts.scan_region, source.scan_shape, name)
    r0, r1, c0, c1 = region
    factor = binning.check_factor(opts.bin_detector)
    margin = binning.check_crop(opts.crop_to_bf)
    calibration = resolve_calibration(file_cal, opts.calibration, name=name)
    out_dtype = target_dtype(source.dtype, name)
    int_max = (int(np.iinfo(source.dtype).max) if source.dtype.kind in "iu" else None)
    nr, nc = r1 - r0, c1 - c0
    stats = QualityStats(integer_max=int_max, frame_alive=np.ones((nr, nc), dtype=bool))
    kr, kc = source.detector_shape
    row_bytes = nc * kr * kc * source.dtype.itemsize
    batches = _row_batches(r0, r1, row_bytes)

    simple = factor == 1 and margin is None and out_dtype == source.dtype
    if allow_view and simple and isinstance(source.array, np.ndarray):
        # Memory-mapped NumPy file: keep a view, only scan it for problems.
        counts = _view(source, region)
        with _progress(nr, f"checking {name}", opts.progress) as bar:
            for a, b in batches:
                block = np.asarray(counts[a - r0:b - r0])
                _check_block(block, stats, name, (a, c0), (a - r0, 0))
                bar.update(b - a)
    else:
        binning.warn_trim(source.detector_shape, factor, name)
        window = _bf_window(source, region, factor, margin) if margin is not None else None
        dkr, dkc = kr // factor, kc // factor
        if window is not None:
            dkr, dkc = window[1] - window[0], window[3] - window[2]
        binned_dtype = binning.binned_dtype(out_dtype) if factor > 1 else out_dtype
        counts = np.empty((nr, nc, dkr, dkc), dtype=binned_dtype)
        with _progress(nr, f"loading {name}", opts.progress) as bar:
            for a, b in batches:
                try:
                    block = source.read(a, b, c0, c1)
                except OSError as exc:
                    raise CorruptFileError(
                        f"{name}: reading scan rows {a}-{b - 1} failed ({exc}): the file is "
                        "truncated or corrupt; re-copy or re-export it (or load a scan_region "
                        "that avoids the damaged part)") from exc
                _check_block(block, stats, name, (a, c0), (a - r0, 0))
                block = _convert(block, out_dtype, name, (a, c0))
                if factor > 1:
                    block = binning.bin_frames(block, factor, name=name)
                if window is not None:
                    block = block[:, :, window[0]:window[1], window[2]:window[3]]
                counts[a - r0:b - r0] = block
                bar.update(b - a)
        if factor > 1 and calibration.get("detector_sampling_mrad") is not None:
            calibration["detector_sampling_mrad"] = (
                float(calibration["detector_sampling_mrad"]) * factor)
    stats.warn(name, (r0, c0))
    return build_dataset(counts, calibration, opts.calibration, file_cal, name)


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


def _view(source: ScanSource, region: Region) -> np.ndarray:
    r0, r1, c0, c1 = region
    arr = source.array
    if source.frames_3d:
        rows, cols = source.scan_shape
        arr = arr.reshape(rows, cols, *source.detector_shape)
    return arr[r0:r1, c0:c1]


def attrs_dict(obj: Any) -> dict[str, Any]:
    """HDF5 attributes as a plain dict (unreadable attributes are skipped)."""
    out: dict[str, Any] = {}
    try:
        keys = list(obj.attrs.keys())
    except Exception:
        return out
    for k in keys:
        try:
            out[k] = obj.attrs[k]
        except Exception:  # unreadable attribute types: metadata is best effort
            continue
    return out

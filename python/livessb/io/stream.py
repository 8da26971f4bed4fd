"""Chunked streaming of a scan region into memory (progress bar, binning, BF crop)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dataset import Dataset4D, DatasetError, measure_bright_field
from ..mapped_pages import release_pages
from .binning import bf_crop_window, bin_frames, binned_dtype, check_crop, check_factor, warn_trim
from .build import build_dataset
from .errors import CorruptFileError
from .metadata import FileCalibration, resolve_calibration
from .options import LoadOptions, Region
from .quality import QualityStats, check_block, convert_counts, target_dtype
from .source import ScanSource, check_region

# Bytes per streamed read: large enough to amortise per-call overhead, small enough
# to keep peak memory low next to the output array.
TARGET_CHUNK_BYTES = 64 * 1024 * 1024
# A memory-mapped file is only checked in place: its pages are released behind each
# batch, so a smaller batch bounds what is mapped at once.
VIEW_CHUNK_BYTES = 8 * 1024 * 1024


def _row_batches(r0: int, r1: int, row_bytes: int,
                 target: int = TARGET_CHUNK_BYTES) -> list[tuple[int, int]]:
    step = max(1, target // max(row_bytes, 1))
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
    acc = bin_frames(acc[None, None], factor)[0, 0] if factor > 1 else acc
    bf = measure_bright_field(acc)
    return bf_crop_window(bf, acc.shape, margin)


def stream_dataset(
    source: ScanSource, opts: LoadOptions, file_cal: FileCalibration | None,
    *, allow_view: bool = False,
) -> Dataset4D:
    """Read the region in row batches (progress bar), bin/crop when asked, check, build."""
    name = source.name
    region = check_region(opts.scan_region, source.scan_shape, name)
    r0, r1, c0, c1 = region
    factor = check_factor(opts.bin_detector)
    margin = check_crop(opts.crop_to_bf)
    if opts.sidecar is not None:
        merged = FileCalibration()
        merged.update_missing(opts.sidecar)
        if file_cal is not None:
            merged.update_missing(file_cal)
        file_cal = merged
    calibration = resolve_calibration(file_cal, opts.calibration, name=name)
    out_dtype = target_dtype(source.dtype, name)
    int_max = (int(np.iinfo(source.dtype).max) if source.dtype.kind in "iu" else None)
    nr, nc = r1 - r0, c1 - c0
    stats = QualityStats(integer_max=int_max, frame_alive=np.ones((nr, nc), dtype=bool))
    kr, kc = source.detector_shape
    row_bytes = nc * kr * kc * source.dtype.itemsize
    batches = _row_batches(r0, r1, row_bytes)

    simple = (factor == 1 and margin is None and out_dtype == source.dtype
              and not any(source.flip))
    if allow_view and simple and isinstance(source.array, np.ndarray):
        # Memory-mapped NumPy file: keep a view, only scan it for problems.
        counts = _view(source, region)
        with _progress(nr, f"checking {name}", opts.progress) as bar:
            for a, b in _row_batches(r0, r1, row_bytes, VIEW_CHUNK_BYTES):
                block = np.asarray(counts[a - r0:b - r0])
                check_block(block, stats, name, (a, c0), (a - r0, 0))
                release_pages(counts[a - r0:b - r0])  # checked: unmapped, still cached
                bar.update(b - a)
    else:
        warn_trim(source.detector_shape, factor, name)
        window = _bf_window(source, region, factor, margin) if margin is not None else None
        dkr, dkc = kr // factor, kc // factor
        if window is not None:
            dkr, dkc = window[1] - window[0], window[3] - window[2]
        stored_dtype = binned_dtype(out_dtype) if factor > 1 else out_dtype
        counts = np.empty((nr, nc, dkr, dkc), dtype=stored_dtype)
        with _progress(nr, f"loading {name}", opts.progress) as bar:
            for a, b in batches:
                try:
                    block = source.read(a, b, c0, c1)
                except OSError as exc:
                    raise CorruptFileError(
                        f"{name}: reading scan rows {a}-{b - 1} failed ({exc}): the file is "
                        "truncated or corrupt; re-copy or re-export it (or load a scan_region "
                        "that avoids the damaged part)") from exc
                check_block(block, stats, name, (a, c0), (a - r0, 0))
                block = convert_counts(block, out_dtype, name, (a, c0))
                if factor > 1:
                    block = bin_frames(block, factor, name=name)
                if window is not None:
                    block = block[:, :, window[0]:window[1], window[2]:window[3]]
                counts[a - r0:b - r0] = block
                bar.update(b - a)
        if factor > 1 and calibration.get("detector_sampling_mrad") is not None:
            calibration["detector_sampling_mrad"] = (
                float(calibration["detector_sampling_mrad"]) * factor)
    stats.warn(name, (r0, c0))
    return build_dataset(Dataset4D, counts, calibration, opts.calibration, file_cal, name)


def _view(source: ScanSource, region: Region) -> np.ndarray:
    r0, r1, c0, c1 = region
    arr = source.array
    if source.frames_3d:
        rows, cols = source.scan_shape
        arr = arr.reshape(rows, cols, *source.detector_shape)
    return arr[r0:r1, c0:c1]



"""Frames of a file arranged on the scan grid, and the scan-region check."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..dataset import DatasetError
from .errors import FileFormatError
from .options import Region


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


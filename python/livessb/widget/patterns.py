"""Diffraction patterns for the widget's pattern panel (diffractionview.py): one pattern
read where the counts live, binned for the wire, and what is drawn over it (the BF disk,
the BF pixels by distance, the repaired pixels, the descan field).

One pattern per request: on a GPU the frame is sliced and binned there and comes to the
host in one counted transfer (``livessb.xp.to_host``), never the whole array; on the
host only that frame is read (a memory map or a file reads one frame).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ..engine.records import DatasetGeometry
from ..xp import resident, to_host

if TYPE_CHECKING:
    from ..preprocess import Corrections, DescanFit

__all__ = ["MAX_PATTERN_PX", "bf_radii_px", "bin_areas", "bin_factor", "binned",
           "descan_record", "pattern_at", "radii_bytes", "repaired_pixels"]

MAX_PATTERN_PX = 128  # longer side of a pattern on the wire (a 192² detector: 2× binned)
MAX_MARKED_PIXELS = 4096  # repaired pixels listed for the marks (a masked detector: many)
DESCAN_ARROWS = 9  # arrows per side of the descan field (at most)
RADIUS_STEP_PX = 0.01  # the BF pixels' distances on the wire: uint16 in these steps


def bin_factor(detector_shape: tuple[int, int], max_px: int = MAX_PATTERN_PX) -> int:
    """The smallest integer bin that brings the longer detector side to ≤ ``max_px``."""
    return max(1, math.ceil(max(int(n) for n in detector_shape) / max_px))


def binned(xp: Any, frame: Any, b: int) -> Any:
    """Mean over b×b blocks (float32, in ``xp``); edge blocks past the detector average
    the pixels they hold."""
    data = frame.astype(xp.float32)
    if b == 1:
        return data
    kr, kc = (int(n) for n in frame.shape)
    hr, hc = -(-kr // b), -(-kc // b)
    padded = xp.zeros((hr * b, hc * b), dtype=xp.float32)
    padded[:kr, :kc] = data
    sums = padded.reshape(hr, b, hc, b).sum(axis=(1, 3))
    return sums / xp.asarray(bin_areas((kr, kc), b))


def bin_areas(detector_shape: tuple[int, int], b: int) -> np.ndarray:
    """Detector pixels in each b×b bin (float32; fewer in the edge bins)."""
    kr, kc = (int(n) for n in detector_shape)
    hr, hc = -(-kr // b), -(-kc // b)
    rows = np.minimum(np.arange(1, hr + 1) * b, kr) - np.arange(hr) * b
    cols = np.minimum(np.arange(1, hc + 1) * b, kc) - np.arange(hc) * b
    out: np.ndarray = np.outer(rows, cols).astype(np.float32)
    return out


def pattern_at(counts: Any, row: int, col: int, b: int) -> np.ndarray:
    """The pattern at scan position (row, col), binned by ``b``: float32 on the host (a
    device array: sliced and binned on the device, one transfer)."""
    xp, data = resident(counts)
    if xp is np:
        try:
            frame = np.asarray(data[row, col])
        except (TypeError, IndexError):  # a store indexed by scan row only
            frame = np.asarray(data[row])[col]
        out: np.ndarray = binned(np, frame, b)
        return out
    return to_host(binned(xp, data[row, col], b), site="diffraction.pattern")


def bf_radii_px(geometry: DatasetGeometry) -> np.ndarray:
    """Distances of the engine's BF pixels from its disk centre (detector px), ascending:
    the N nearest are those a reconstruction with ``bf_pixels=N`` sums over."""
    k = geometry.bf.k_det / geometry.edge_width
    out: np.ndarray = np.sort(np.hypot(k[:, 0], k[:, 1]), kind="stable")
    return out


def radii_bytes(radii_px: np.ndarray) -> bytes:
    """Little-endian uint16 of the distances in ``RADIUS_STEP_PX`` steps (the widget draws
    the circle of the N nearest: exact to 0.01 px)."""
    codes = np.clip(np.round(radii_px / RADIUS_STEP_PX), 0, 65535).astype("<u2")
    return codes.tobytes()


def repaired_pixels(corrections: Corrections) -> tuple[list[list[int]], int]:
    """(row, col) of the bad pixels the preprocessing repairs (at most MAX_MARKED_PIXELS)
    and how many there are."""
    rows, cols = np.nonzero(corrections.bad_pixels)
    listed = [[int(r), int(c)] for r, c in zip(rows[:MAX_MARKED_PIXELS],
                                               cols[:MAX_MARKED_PIXELS], strict=True)]
    return listed, int(rows.size)


def descan_record(fit: DescanFit | None, applied: bool) -> dict[str, Any] | None:
    """What the panel draws of a descan fit (None: no fit, the scan too small or descan
    off): model, span, residual, significant/applied and the variation on a grid."""
    if fit is None:
        return None
    Rr, Rc = fit.scan_shape
    field = fit.centre_map(variation_only=True)
    rows = np.unique(np.round(np.linspace(0, Rr - 1, min(DESCAN_ARROWS, Rr))).astype(int))
    cols = np.unique(np.round(np.linspace(0, Rc - 1, min(DESCAN_ARROWS, Rc))).astype(int))
    shift = field[np.ix_(rows, cols)].reshape(-1, 2)  # (rows·cols) × (d_row, d_col) px
    return {"model": fit.model, "span_px": float(fit.span_px),
            "residual_rms_px": float(fit.residual_rms_px), "significant": fit.significant,
            "applied": bool(applied), "rows_px": rows.astype(float).tolist(),
            "cols_px": cols.astype(float).tolist(), "shift_px": shift.astype(float).tolist()}


"""Phase image -> PNG bytes (Pillow): grey colormap, robust contrast.

Pure and small: the widget streams these bytes to the browser.
"""

from __future__ import annotations

import io

import numpy as np

__all__ = ["contrast_limits", "phase_to_png", "to_uint8"]

DEFAULT_PERCENTILES: tuple[float, float] = (0.5, 99.5)


def contrast_limits(image: np.ndarray,
                    percentiles: tuple[float, float] = DEFAULT_PERCENTILES) -> tuple[float, float]:
    """Display range from the given percentiles of the finite pixels."""
    a = np.asarray(image, dtype=np.float64)
    finite = a[np.isfinite(a)]
    if finite.size == 0:
        return 0.0, 1.0
    lo, hi = np.percentile(finite, percentiles)
    return float(lo), float(hi)


def to_uint8(image: np.ndarray, limits: tuple[float, float] | None = None) -> np.ndarray:
    """Map to 0..255 linearly between the limits (clipped); flat images give mid-grey."""
    a = np.asarray(image, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"expected a 2-D image, got shape {a.shape}")
    lo, hi = contrast_limits(a) if limits is None else limits
    if not hi > lo:
        return np.full(a.shape, 128, dtype=np.uint8)
    scaled = (np.nan_to_num(a, nan=lo, posinf=hi, neginf=lo) - lo) * (255.0 / (hi - lo))
    return np.clip(np.rint(scaled), 0, 255).astype(np.uint8)


def phase_to_png(phase: np.ndarray, limits: tuple[float, float] | None = None,
                 compress_level: int = 1, max_px: int | None = None) -> bytes:
    """Grey PNG of a 2-D phase image (rad), contrast from the 0.5/99.5 percentiles.

    ``max_px`` caps the longer side (box-filter downsampling, aspect kept), for
    display-only images; ``None`` keeps every pixel.
    """
    from PIL import Image

    img = Image.fromarray(to_uint8(phase, limits))
    if max_px is not None and max(img.size) > max_px:
        scale = max_px / max(img.size)
        size = (max(1, round(img.size[0] * scale)), max(1, round(img.size[1] * scale)))
        img = img.resize(size, Image.Resampling.BOX)
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=compress_level)
    return buf.getvalue()

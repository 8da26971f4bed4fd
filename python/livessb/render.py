"""Images -> display pixels: robust contrast, colormaps, scale bar, PNG bytes (Pillow).

Pure and small: the widget streams these bytes to the browser, exports burn
colormap and scale bar into PNGs. Colormaps by matplotlib name; the front end
uses the same names.
"""

from __future__ import annotations

import io
import math

import numpy as np

__all__ = ["COLORMAPS", "colorize", "contrast_limits", "draw_scale_bar", "phase_to_png",
           "scale_bar_length", "to_uint8"]

DEFAULT_PERCENTILES: tuple[float, float] = (0.5, 99.5)
COLORMAPS: tuple[str, ...] = ("gray", "viridis", "inferno", "magma", "twilight")
SCALE_BAR_FRACTION = 0.2  # the bar is the longest round length up to this share of the width


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


def colorize(image: np.ndarray, colormap: str = "gray",
             limits: tuple[float, float] | None = None) -> np.ndarray:
    """RGB uint8 (h, w, 3): ``image`` between ``limits`` through a 256-entry colormap."""
    if colormap not in COLORMAPS:
        raise ValueError(f"unknown colormap {colormap!r}: use one of {', '.join(COLORMAPS)}")
    import matplotlib

    lut = matplotlib.colormaps[colormap](np.linspace(0.0, 1.0, 256))[:, :3]
    lut8 = np.clip(np.rint(lut * 255.0), 0, 255).astype(np.uint8)
    return lut8[to_uint8(image, limits)]


def scale_bar_length(width_px: int, pixel_A: float,
                     fraction: float = SCALE_BAR_FRACTION) -> tuple[float, str]:
    """A round length (1, 2 or 5 × 10ⁿ Å) of at most ``fraction`` of the width, and its
    label ("5 Å", "1 nm", "20 nm")."""
    if not (pixel_A > 0 and width_px > 0):
        raise ValueError(f"scale bar needs a positive width and pixel size, got "
                         f"{width_px} px of {pixel_A} Å")
    target = width_px * pixel_A * fraction
    exponent = math.floor(math.log10(target))
    length = 10.0**exponent
    for m in (5.0, 2.0, 1.0):
        if m * 10.0**exponent <= target:
            length = m * 10.0**exponent
            break
    value, unit = (length / 10.0, "nm") if length >= 10.0 else (length, "Å")
    return length, f"{value:g} {unit}"


def draw_scale_bar(rgb: np.ndarray, pixel_A: float) -> tuple[np.ndarray, str]:
    """A white bar with a black outline and its label in the lower left corner."""
    from PIL import Image, ImageDraw

    h, w = rgb.shape[:2]
    length_A, label = scale_bar_length(w, pixel_A)
    bar_px = max(1, round(length_A / pixel_A))
    img = Image.fromarray(np.ascontiguousarray(rgb[..., :3]), mode="RGB")
    draw = ImageDraw.Draw(img)
    margin, thick = max(2, w // 40), max(2, h // 80)
    x0, y1 = margin, h - margin
    y0 = y1 - thick
    draw.rectangle((x0 - 1, y0 - 1, x0 + bar_px, y1 + 1), fill=(0, 0, 0))
    draw.rectangle((x0, y0, x0 + bar_px - 1, y1), fill=(255, 255, 255))
    text_y = max(0, y0 - 4 - 11)
    draw.text((x0, text_y), label, fill=(255, 255, 255), stroke_width=1, stroke_fill=(0, 0, 0))
    return np.asarray(img), label

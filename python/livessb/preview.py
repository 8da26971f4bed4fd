"""Preview frames: the full field at display resolution for a set of parameters.

Not widget specific: ``render_preview`` returns a :class:`Frame` (image, VP loss,
parameters, sampling) and ``Frame.quantised`` the uint16 bytes and range the
widget streams (docs/widget-protocol.md). What the widget shows before any fit is
``livessb.virtual``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .params import ABERRATION_KEYS, JOINT, to_vector
from .physics.optics import has_higher_order

if TYPE_CHECKING:
    from .session import Session

__all__ = ["VIEWS", "Frame", "display_upsample", "loss_names", "numeric_params", "params_loss",
           "render_preview"]

VIEWS: tuple[str, ...] = ("phase", "amplitude")
U16_MAX = 65535
ROTATION_TOL_DEG = 1e-6  # closer to the fitted rotation than this: the fitted geometry


@dataclass(frozen=True)
class Frame:
    """One preview image with what produced it."""

    image: np.ndarray  # float32 (h, w): phase in rad or amplitude
    params: dict[str, float]
    rotation_deg: float
    loss: float  # VP loss of ``params`` (higher orders included) at ``rotation_deg``
    view: str
    upsample: int
    sampling_A: tuple[float, float]  # Å per image pixel (row, col)
    draft: bool = False  # a slider is being dragged: no upsampling, the full frame follows
    bf_pixels: int | None = None  # BF pixels summed (the nearest the disk centre); None: all

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.image.shape[0]), int(self.image.shape[1]))

    def quantised(self) -> tuple[bytes, tuple[float, float]]:
        """Little-endian uint16 bytes and (lo, hi): value = lo + (hi - lo)·u/65535.

        The range is that of the finite pixels; non-finite pixels map to lo.
        """
        return quantise(self.image)

    def message(self, seq: int) -> tuple[dict[str, Any], list[bytes]]:
        """The protocol's ``frame`` message and its one buffer."""
        data, (lo, hi) = self.quantised()
        content = {"type": "frame", "seq": int(seq), "params": dict(self.params),
                   "rotation_deg": self.rotation_deg, "loss": self.loss, "view": self.view,
                   "shape": list(self.shape), "range": [lo, hi],
                   "sampling_A": list(self.sampling_A), "draft": self.draft,
                   "bf_pixels": self.bf_pixels}
        return content, [data]


def quantise(image: np.ndarray) -> tuple[bytes, tuple[float, float]]:
    """Little-endian uint16 bytes of ``image`` and its finite range (lo, hi)."""
    from .quantise_u16 import quantise_into

    flat = np.ascontiguousarray(image).ravel()
    if flat.dtype not in (np.float32, np.float64):
        flat = flat.astype(np.float64)
    lo, hi = float(flat.min()), float(flat.max())  # NaN if any pixel is not finite
    if not (math.isfinite(lo) and math.isfinite(hi)):
        finite = flat[np.isfinite(flat)]
        if finite.size == 0:
            return np.zeros(flat.size, dtype="<u2").tobytes(), (0.0, 0.0)
        lo, hi = float(finite.min()), float(finite.max())
    scale = U16_MAX / (hi - lo) if hi > lo else 0.0
    out = np.empty(flat.size, dtype="<u2")
    quantise_into(flat, lo, scale, out)
    return out.tobytes(), (lo, hi)


def dequantise(data: bytes, shape: tuple[int, int], value_range: tuple[float, float]
               ) -> np.ndarray:
    """Inverse of :func:`quantise` (float64), as the browser computes it."""
    lo, hi = value_range
    u = np.frombuffer(data, dtype="<u2").reshape(shape).astype(np.float64)
    return lo + (hi - lo) * u / U16_MAX


def numeric_params(raw: Any, what: str) -> dict[str, float]:
    """``{name: float}`` of a parameter mapping from outside (a message, a pin); a
    ValueError names ``what`` and the problem."""
    if not isinstance(raw, Mapping) or not raw:
        raise ValueError(f"{what} needs params: a non-empty mapping of name -> value")
    try:
        return {str(k): float(v) for k, v in raw.items()}
    except (TypeError, ValueError):
        raise ValueError(f"{what}: every parameter value must be a number, got {raw!r}") from None


def display_upsample(scan_shape: tuple[int, int], auto_factor: int, max_px: int) -> int:
    """The largest upsampling ≤ ``auto_factor`` whose output fits ``max_px`` on the longer
    side, at least 1."""
    longest = max(int(n) for n in scan_shape)
    return max(1, min(int(auto_factor), int(max_px) // max(longest, 1)))


def render_preview(session: Session, params: Mapping[str, float],
                   rotation_deg: float | None = None, view: str = "phase",
                   max_px: int = 1024, loss: float | None = None,
                   draft: bool = False, bf_pixels: int | None = None) -> Frame:
    """Reconstruct the full field at display resolution with ``params``.

    ``draft``: at the scan's own sampling (no upsampling: a quarter or less of the
    pixels), for the frames of a slider drag; the release asks for the full frame.

    ``params`` may hold any coefficient up to fifth order; missing joint parameters
    are 0. ``rotation_deg`` (default: the session's fitted rotation) reconstructs at
    another scan/detector rotation; the loss is then the loss at that rotation.
    ``loss`` given (e.g. a fit's own loss for its parameters) is used as is; otherwise
    it is :func:`params_loss` of ``params``: the loss of the image on screen.
    ``bf_pixels``: the image sums over that many BF pixels, the nearest the disk centre
    (``Session.reconstruct``); the loss is the fit's objective, over every pixel.
    """
    if view not in VIEWS:
        raise ValueError(f"view must be one of {VIEWS}, got {view!r}")
    clean = {str(k): float(v) for k, v in params.items()}  # NaN: reconstruct refuses it
    f = 1 if draft else display_upsample(session.dataset.scan_shape, session.upsample_factor,
                                         max_px)
    with at_rotation(session, rotation_deg) as rot:
        rec = session.reconstruct(clean, upsample=f, bf_pixels=bf_pixels)
        if loss is None:
            loss = params_loss(session, clean)
    image = rec.phase if view == "phase" else np.abs(rec.object).astype(np.float32)
    return Frame(image=image, params=clean, rotation_deg=rot, loss=float(loss), view=view,
                 upsample=f, sampling_A=(float(rec.sampling_A[0]), float(rec.sampling_A[1])),
                 draft=bool(draft), bf_pixels=bf_pixels)


def loss_names(params: Mapping[str, float]) -> tuple[str, ...]:
    """The names the VP loss of ``params`` is evaluated over: the six joint parameters, and
    every other aberration coefficient and angle present once a coefficient beyond C10/C12
    is nonzero (those leave the engines' six-parameter fast path, so only then)."""
    if not has_higher_order(params):
        return JOINT
    return JOINT + tuple(k for k in params if k in ABERRATION_KEYS and k not in JOINT)


def params_loss(session: Session, params: Mapping[str, float]) -> float:
    """VP loss (the fraction of the measured sideband energy the model leaves unexplained)
    of ``params`` on the session's full field at its current rotation: the joint parameters
    (missing: 0) and every higher-order coefficient they hold, as the image is
    reconstructed with them."""
    names = loss_names(params)
    vector = to_vector(params, names, default=0.0)[None]
    return float(session.loss_evaluator(names=names)(vector)[0])


@contextlib.contextmanager
def at_rotation(session: Session, rotation_deg: float | None) -> Iterator[float]:
    """The session's full field at ``rotation_deg`` for the block, its fitted rotation after.

    The session reconstructs and scores at ``radians(session.rotation_deg)``; the
    fitted value is put back exactly (and the field re-rotated there) on exit.
    """
    fitted = session.rotation_deg
    if rotation_deg is None or fitted is None or same_rotation(rotation_deg, fitted):
        yield float(fitted) if fitted is not None else float("nan")
        return
    session.rotation_deg = float(rotation_deg) % 360.0
    try:
        yield session.rotation_deg
    finally:
        session.rotation_deg = fitted
        if not session.closed:
            session.loss_evaluator()  # back to the fitted rotation's geometry


def same_rotation(a_deg: float, b_deg: float) -> bool:
    """Equal up to ``ROTATION_TOL_DEG`` modulo 360° (a slider's -10° is the fit's 350°)."""
    return abs((float(a_deg) - float(b_deg) + 180.0) % 360.0 - 180.0) < ROTATION_TOL_DEG


"""The widget's diffraction panel, Python side (docs/widget-protocol.md: ``pattern``,
``diffraction_info``, ``bf_pixels``).

A ``pattern`` request (the pattern under the pointer, or the mean) is answered at once
on the thread that receives it, not on the worker, so patterns come while a fit runs:
one pattern read where the counts live (patterns.py), binned to at most 128 px a side,
as uint16 codes with their range (a frame's encoding), kept in a small cache. The
``bf_pixels`` trait sets how many BF pixels the image on screen sums over; a change
re-renders the frame on screen with the same parameters (its loss is unchanged: the
fit's objective uses every pixel).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..engine.records import DatasetGeometry
from ..preview import quantise, render_preview
from .patterns import (
    bf_radii_px,
    bin_areas,
    bin_factor,
    binned,
    descan_record,
    pattern_at,
    radii_bytes,
    repaired_pixels,
)

if TYPE_CHECKING:
    from .widget import SSBWidget

__all__ = ["DiffractionView", "PatternRequest"]

CACHE_PATTERNS = 128  # patterns kept (≤ 32 KiB each at 128²)


@dataclass(frozen=True)
class PatternRequest:
    seq: int
    position: tuple[int, int] | None  # scan px (row, col); None: the mean pattern

    @classmethod
    def from_message(cls, content: dict[str, Any], scan_shape: tuple[int, int]
                     ) -> PatternRequest:
        """The ``pattern`` message checked; ValueError names the bad field."""
        try:
            seq = int(content.get("seq", 0))
        except (TypeError, ValueError):
            raise ValueError(f"seq must be an integer, got {content.get('seq')!r}") from None
        if content.get("mean"):
            return cls(seq, None)
        row, col = content.get("row"), content.get("col")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (row, col)):
            raise ValueError(f"pattern needs integer row and col (scan px), got {row!r}, "
                             f"{col!r}")
        assert isinstance(row, int) and isinstance(col, int)
        if not (0 <= row < scan_shape[0] and 0 <= col < scan_shape[1]):
            raise ValueError(f"pattern position ({row}, {col}) is outside the "
                             f"{scan_shape[0]}×{scan_shape[1]} scan")
        return cls(seq, (row, col))


class DiffractionView:
    """Patterns, the panel's overlays and the BF-pixel count of one widget."""

    def __init__(self, widget: SSBWidget) -> None:
        self._w = widget
        s = widget.session
        ds = s.dataset
        self._bin = bin_factor(ds.detector_shape)
        engine_ds = s.preprocessing.dataset_for_engine(ds)  # the BF disk the engine uses
        self._bright_field = engine_ds.bright_field
        self._geometry = DatasetGeometry.of(engine_ds)
        self._descan = s.descan
        bad = s.preprocessing.bad_pixels
        self._bad_bins = (binned(np, bad, self._bin) > 0) if bad.any() else None
        self._centres = None if self._descan is None else self._descan.centre_map()
        self._cache: OrderedDict[tuple[int, int] | None, tuple[dict[str, Any], bytes]] = (
            OrderedDict())
        self._lock = threading.Lock()
        widget.observe(self._on_bf_pixels, names="bf_pixels")

    @property
    def total_bf_pixels(self) -> int:
        return int(self._geometry.bf.count)

    def info(self) -> dict[str, Any]:
        """The ``diffraction_info`` trait: detector, binning, BF disk and its pixels by
        distance, repaired pixels, descan."""
        s = self._w.session
        bf, geo = self._bright_field, self._geometry
        marked, repaired = repaired_pixels(s.preprocessing)
        return {
            "detector_shape": [int(n) for n in s.dataset.detector_shape], "bin": self._bin,
            "bf": {"center_row": float(bf.center_row), "center_col": float(bf.center_col),
                   "radius_px": float(bf.radius_px),
                   "pixels_radius_px": float(geo.k_alpha / geo.edge_width)},
            "bf_pixels_total": self.total_bf_pixels,
            "bf_radii": radii_bytes(bf_radii_px(geo)),  # uint16, 0.01 px steps, ascending
            "repaired": marked, "repaired_count": repaired,
            "descan": descan_record(self._descan, s.preprocessing.descan_applied),
        }

    # -- patterns ------------------------------------------------------------------
    def message(self, content: dict[str, Any]) -> None:
        """Answer a ``pattern`` request with one ``pattern`` message (and its buffer)."""
        w = self._w
        req = PatternRequest.from_message(content, tuple(w.scan_shape))  # type: ignore[arg-type]
        reply, data = self._pattern(req.position)
        w.send({**reply, "seq": req.seq}, buffers=[data])

    def _pattern(self, position: tuple[int, int] | None) -> tuple[dict[str, Any], bytes]:
        with self._lock:
            hit = self._cache.get(position)
            if hit is not None:
                self._cache.move_to_end(position)
                return hit
        ds = self._w.session.dataset
        if position is None:
            image = binned(np, np.asarray(ds.mean_pattern), self._bin)
        else:
            image = pattern_at(ds.counts, position[0], position[1], self._bin)
        total = float((image * bin_areas(ds.detector_shape, self._bin)).sum(dtype=np.float64))
        # the repaired (hot) pixels saturate: the brightest good pixel is the scale's top
        data, (lo, hi) = quantise(np.minimum(image, self._good_max(image)))
        centre = None
        if position is not None and self._centres is not None:
            centre = [float(v) for v in self._centres[position[0], position[1]]]
        reply = {"type": "pattern", "kind": "frame" if position is not None else "mean",
                 "position": None if position is None else list(position),
                 "shape": [int(image.shape[0]), int(image.shape[1])], "bin": self._bin,
                 "range": [lo, hi], "descan_centre_px": centre, "total": total}
        with self._lock:
            self._cache[position] = (reply, data)
            while len(self._cache) > CACHE_PATTERNS:
                self._cache.popitem(last=False)
        return reply, data

    def _good_max(self, image: np.ndarray) -> float:
        """The largest value of the bins without a repaired pixel (all bad: the max)."""
        if self._bad_bins is None or self._bad_bins.all():
            return float(image.max())
        return float(image[~self._bad_bins].max())

    # -- BF pixels -------------------------------------------------------------------
    def bf_pixels(self) -> int | None:
        """The count the image on screen sums over (None: all, the trait's 0)."""
        n = int(self._w.bf_pixels)
        return None if n <= 0 or n >= self.total_bf_pixels else n

    def _on_bf_pixels(self, change: dict[str, Any]) -> None:
        w = self._w
        n = int(change["new"])
        if not 0 <= n <= self.total_bf_pixels:
            with w._lock:
                w._set_error(f"BF pixels {n} refused: choose 1 … {self.total_bf_pixels} "
                             "(0: all)")
            return
        last = w._frames.last
        if last is None or w._closed:
            return  # no frame yet: the fit's frame will use the count
        params = dict(last["params"])
        rotation, view, loss = last.get("rotation_deg"), last.get("view", "phase"), last["loss"]

        def run(_generation: int) -> None:
            frame = render_preview(w.session, params, rotation, view, w.max_frame_px,
                                   loss=loss, bf_pixels=self.bf_pixels())
            w._send_frame(frame, None)

        w._submit("preview", run)  # latest wins with slider drags and other previews


"""The widget's virtual images (``livessb.virtual``): what the scan view shows before
and during the first fit (docs/widget-protocol.md, ``virtual_images`` and ``image``).

The pass over the counts runs once per widget, on the worker, ahead of the first fit
(it costs a small fraction of a second where the counts live); every image then travels
as uint16 codes with its range, like a preview frame, so the browser paints it with
the user's colormap and contrast. Once a fit has set the rotation, iCoM is integrated
again with it (scan-sized arrays only) and republished.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from ..preview import quantise
from ..virtual import UNITS, VIRTUAL_IMAGES, DetectorSums, detector_sums, virtual_images
from ..xp import to_host

if TYPE_CHECKING:
    from .widget import SSBWidget

__all__ = ["LABELS", "VirtualView", "image_record"]

LABELS: dict[str, str] = {"virtual-bf": "virtual BF", "virtual-adf": "virtual ADF",
                          "icom": "iCoM", "dpc": "DPC |COM|"}


def image_record(name: str, image: np.ndarray) -> dict[str, Any]:
    """One image on the wire: ``{label, unit, shape, range, data}`` (``data``: h·w
    little-endian uint16, value = lo + (hi - lo)·u/65535, as a frame's buffer)."""
    # float32, as the preview frames: one compiled quantiser (Numba) serves both
    data, (lo, hi) = quantise(np.asarray(image, dtype=np.float32))
    return {"label": LABELS[name], "unit": UNITS[name],
            "shape": [int(image.shape[0]), int(image.shape[1])], "range": [lo, hi],
            "data": data}


class VirtualView:
    """Computes (once) and publishes one widget's virtual images."""

    def __init__(self, widget: SSBWidget) -> None:
        self._w = widget
        self._sums: DetectorSums | None = None
        self._oriented: tuple[float | None, bool | None] | None = None  # iCoM's rotation
        self._lock = threading.Lock()

    def sums(self) -> DetectorSums:
        """The pass over the counts (made on the first call, then kept)."""
        with self._lock:
            if self._sums is None:
                ds = self._w.session.dataset
                bf = ds.bright_field
                self._sums = detector_sums(ds.counts, (bf.center_row, bf.center_col),
                                           bf.radius_px)
            return self._sums

    def bright_field(self) -> np.ndarray:
        """The virtual BF image on the host (the fit-less widget's ``scan_png``)."""
        return to_host(self.sums().bf, site="virtual.bf")

    def publish(self) -> None:
        """Set ``virtual_images`` (on the worker); again only when the rotation changed."""
        s = self._w.session
        key = (s.rotation_deg, s.transpose)
        if key == self._oriented or self._w._closed:
            return
        images = virtual_images(s.dataset, s.rotation_deg, s.transpose, sums=self.sums())
        records = {name: image_record(name, images[name]) for name in VIRTUAL_IMAGES}
        records["icom"].update(rotation_deg=images.rotation_deg,
                               rotation_source=images.rotation_source)
        if self._w._closed:
            return
        self._oriented = key
        self._w.virtual_images = records

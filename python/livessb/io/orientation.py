"""Detector orientation on load: which way up the frames are (``flip=``).

Every reader hands out frames as stored in the file except ``.mib``: a Merlin
frame's first stored row is the bottom of the camera image, and rosettasciio,
HyperSpy and pyxem flip the rows so that detector row 0 is the top. livessb
does the same by default (``flip="rosettasciio"``); ``flip="libertem"`` (or
``"none"``) keeps the stored order, LiberTEM's orientation. ``"rows"``,
``"cols"`` and ``"both"`` reverse the stored order explicitly, for any format.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dataset import DatasetError

# Explicit transforms of the stored frame: (reverse rows, reverse cols).
_EXPLICIT = {"none": (False, False), "rows": (True, False), "cols": (False, True),
             "both": (True, True)}
# Named conventions: the transform each tool applies to each format's stored frames.
_CONVENTIONS = {
    "rosettasciio": {"mib": (True, False)},
    "hyperspy": {"mib": (True, False)},
    "pyxem": {"mib": (True, False)},
    "libertem": {},
}
FLIP_CHOICES: tuple[str, ...] = (*_CONVENTIONS, *_EXPLICIT)
DEFAULT_FLIP = "rosettasciio"

Flip = tuple[bool, bool]


def resolve_flip(flip: Any, fmt: str) -> Flip:
    """(reverse detector rows, reverse detector cols) for ``flip`` on format ``fmt``."""
    key = DEFAULT_FLIP if flip is None else flip
    if isinstance(key, str) and key.lower() in _EXPLICIT:
        return _EXPLICIT[key.lower()]
    if isinstance(key, str) and key.lower() in _CONVENTIONS:
        return _CONVENTIONS[key.lower()].get(fmt, (False, False))
    raise DatasetError(
        f"flip={flip!r} is not an orientation: use one of {', '.join(map(repr, FLIP_CHOICES))} "
        f"(default {DEFAULT_FLIP!r}: detector row 0 at the top of the camera image, as "
        "rosettasciio/HyperSpy/pyxem show it)")


def apply_flip(frames: np.ndarray, flip: Flip) -> np.ndarray:
    """``frames[..., kr, kc]`` with the detector axes reversed as asked (a view)."""
    rows, cols = flip
    if rows:
        frames = frames[..., ::-1, :]
    if cols:
        frames = frames[..., ::-1]
    return frames

"""Dectris/Arina (NeXus) master files: ``/entry/data/data_000001...`` read as one stack.

The links point at data files that must sit next to the master; frames are usually
bitshuffle-LZ4 compressed (``hdf5plugin``, imported by ``h5py_module``, decodes them).
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

import numpy as np

from .errors import CorruptFileError, FileFormatError
from .h5 import h5py_module, is_numeric_dataset, open_hdf5

_DECTRIS_LINK = re.compile(r"^data_\d{6}$")


def dectris_links(f: Any) -> list[str]:
    """Names ``data_000001...`` under ``/entry/data`` of a Dectris/Arina master, in order."""
    h5py = h5py_module()
    grp = f.get("/entry/data")
    if grp is None or not isinstance(grp, h5py.Group):
        return []
    return sorted(k for k in grp.keys() if _DECTRIS_LINK.match(k))


def open_links(f: Any, names: list[str], base: Path, stack: contextlib.ExitStack,
                name: str) -> list[Any]:
    h5py = h5py_module()
    grp = f["/entry/data"]
    dsets = []
    for key in names:
        link = grp.get(key, getlink=True)
        if isinstance(link, h5py.ExternalLink):
            target = Path(link.filename)
            if not target.is_absolute():
                target = base / target
            if not target.exists():
                raise CorruptFileError(
                    f"{name}: the master file links {key} to {link.filename!r}, which is "
                    f"missing: keep every data file next to the master file ({base})")
            ext = stack.enter_context(open_hdf5(target, target.name))
            obj = ext.get(link.path)
            where = f"{target.name}:{link.path}"
        else:
            obj = grp.get(key)
            where = f"{name}:/entry/data/{key}"
        if not is_numeric_dataset(obj) or obj.ndim != 3:
            raise FileFormatError(
                f"{name}: {key} -> {where} is not a 3D stack of frames "
                f"({getattr(obj, 'shape', None)})")
        dsets.append(obj)
    return dsets


class ConcatFrames:
    """Several 3D frame stacks read as one (first-axis slices only)."""

    def __init__(self, parts: list[Any], name: str) -> None:
        shapes = {tuple(p.shape[1:]) for p in parts}
        dtypes = {np.dtype(p.dtype) for p in parts}
        if len(shapes) != 1 or len(dtypes) != 1:
            raise FileFormatError(
                f"{name}: the data files disagree on frame shape/dtype {shapes} {dtypes}")
        self.parts = parts
        self.starts = np.cumsum([0] + [int(p.shape[0]) for p in parts])
        self.dtype = dtypes.pop()
        self.shape = (int(self.starts[-1]), *shapes.pop())

    def __getitem__(self, key: Any) -> np.ndarray:
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("ConcatFrames supports contiguous first-axis slices only")
        start, stop, _ = key.indices(self.shape[0])
        pieces = []
        for i, part in enumerate(self.parts):
            lo, hi = int(self.starts[i]), int(self.starts[i + 1])
            a, b = max(start, lo), min(stop, hi)
            if a < b:
                pieces.append(np.asarray(part[a - lo:b - lo]))
        if not pieces:
            return np.empty((0, *self.shape[1:]), dtype=self.dtype)
        return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)



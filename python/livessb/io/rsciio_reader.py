"""Formats read through rosettasciio (optional extra ``livessb[formats]``): DM3/DM4,
MRC, EMPAD (``.xml`` + ``.raw``), blockfile (``.blo``), HyperSpy ``.hspy``/``.zspy``,
TVIPS, TIA ``.ser``, … — every reader rosettasciio has for the suffix, tried in order.

Files are read lazily where the reader can (dask; only the requested ``scan_region``
is computed) and streamed like any other file. Calibration comes from the signal's
axes and ``Acquisition_instrument.TEM`` metadata (``livessb.io.foreign``); the frames
are taken in rosettasciio's orientation.
"""

from __future__ import annotations

import copy
import importlib
from pathlib import Path
from typing import Any

import numpy as np

from ..dataset import Dataset4D
from .errors import FileFormatError, UnsupportedFormatError
from .foreign import signal_dict_calibration
from .metadata import FileCalibration
from .options import LoadOptions
from .orientation import resolve_flip
from .source import ScanSource
from .stream import stream_dataset

# Where two readers claim a suffix, the 4D-STEM one first.
_PREFERRED = {"xml": ("EMPAD",), "mrc": ("MRC",), "h5": ("Arina",)}


def rsciio_readers(suffix: str) -> list[tuple[str, Any]]:
    """(name, file_reader) of every rosettasciio reader for ``suffix``; [] without rosettasciio."""
    try:
        from rsciio import IO_PLUGINS
    except ImportError:
        return []
    ext = suffix.lower().lstrip(".")
    plugins = [p for p in IO_PLUGINS if ext in [e.lower() for e in p["file_extensions"]]]
    first = _PREFERRED.get(ext, ())
    plugins.sort(key=lambda p: (p["name"] not in first, first.index(p["name"])
                                if p["name"] in first else 0))
    out = []
    for p in plugins:
        try:
            out.append((str(p["name"]), importlib.import_module(p["api"]).file_reader))
        except (ImportError, AttributeError):  # a reader whose own extra is missing
            continue
    return out


def _read(path: Path, readers: list[tuple[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    errors = []
    for name, reader in readers:
        for lazy in (True, False):
            try:
                return name, list(reader(str(path), lazy=lazy))
            except NotImplementedError:
                continue  # lazy not supported: read eagerly
            except Exception as exc:  # each reader fails its own way on a foreign file
                errors.append(f"{name}: {type(exc).__name__}: {exc}")
                break
    raise FileFormatError(
        f"{path.name}: rosettasciio could not read it ({'; '.join(errors)[:400]}): check "
        "that the file is complete, or convert it with the acquisition software")


def _choose(signals: list[dict[str, Any]], name: str) -> dict[str, Any]:
    cands = [s for s in signals if len(getattr(s.get("data"), "shape", ())) in (3, 4)]
    if not cands:
        shapes = [tuple(getattr(s.get("data"), "shape", ())) for s in signals]
        raise FileFormatError(
            f"{name}: no 3D/4D data in the file (signals of shape {shapes}): 4D-STEM needs "
            "(scan rows, scan cols, detector rows, detector cols) or a stack of frames")
    return max(cands, key=lambda s: (np.ndim(s["data"]), int(np.prod(np.shape(s["data"])))))


def _signal(path: Path) -> tuple[dict[str, Any], FileCalibration, str]:
    readers = rsciio_readers(path.suffix)
    if not readers:
        raise UnsupportedFormatError(
            f"{path.name}: livessb reads {path.suffix!r} files through rosettasciio, which is "
            "not installed: pip install 'livessb[formats]' (or pip install rosettasciio); "
            "or convert the file and save the counts with numpy.save")
    reader, signals = _read(path, readers)
    sig = _choose(signals, path.name)
    where = f"{path.name} ({reader} reader)"
    metadata = mapped_metadata(sig)
    cal = signal_dict_calibration(sig.get("axes", []), metadata, where)
    return sig, cal, where


def mapped_metadata(sig: dict[str, Any]) -> dict[str, Any]:
    """The signal's metadata with the reader's ``mapping`` applied (as HyperSpy does on
    load: ``original_metadata`` paths copied, through the reader's function, to ``metadata``)."""
    metadata = copy.deepcopy(sig.get("metadata") or {})
    original = sig.get("original_metadata") or {}
    for src, target in (sig.get("mapping") or {}).items():
        value: Any = original
        for part in str(src).split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is None or not isinstance(target, tuple | list) or not target:
            continue
        fn = target[1] if len(target) > 1 else None
        try:
            value = fn(value) if callable(fn) else value
        except Exception:  # the reader's own conversion failed: metadata is best effort
            continue
        node = metadata
        *parents, leaf = str(target[0]).split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                break
        else:
            node.setdefault(leaf, value)
    return metadata


def read_rsciio_metadata(path: Path) -> FileCalibration:
    """The calibration rosettasciio's reader gives (lazy: counts are not read)."""
    return _signal(path)[1]


def load_rsciio(path: Path, opts: LoadOptions) -> Dataset4D:
    sig, cal, where = _signal(path)
    source = ScanSource(sig["data"], opts.scan_shape, where,
                        flip=resolve_flip(opts.flip, "rsciio"))
    return stream_dataset(source, opts, cal)

"""Quantum Detectors Merlin ``.mib`` files (counting mode, U08/U16/U32 frames).

A ``.mib`` file is a sequence of frames, each an ASCII header that starts with
``MQ1,<seq>,<header bytes>,<chips>,<width>,<height>,<dtype>,...`` followed by
big-endian pixel data. The file is memory-mapped and read in chunks. The scan
shape is not stored in it: ``scan_shape=(rows, cols)``, or the acquisition's
``.hdr`` file next to it (``Frames per Trigger (Number)`` frames per scan line,
``Frames in Acquisition (Number)`` in all, as rosettasciio reads it). The first
stored row of a frame is the bottom of the camera image: by default the rows are
reversed so that detector row 0 is the top, as rosettasciio, HyperSpy and pyxem
show it (``flip="libertem"`` keeps the stored order, see ``orientation``). Raw
("R64", colour/raw mode) files are not supported: convert them with the
Merlin software or with rosettasciio (``pip install rosettasciio``;
``rsciio.quantumdetector.file_reader``) and save the counts as ``.npy``/HDF5.
Flyback columns recorded by some scans are part of the data: pass the scan
shape including them and drop them with ``scan_region``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..dataset import Dataset4D
from .errors import CorruptFileError, UnsupportedFormatError
from .options import LoadOptions
from .orientation import resolve_flip
from .source import ScanSource
from .stream import stream_dataset

_DTYPES = {"U01": None, "U08": ">u1", "U16": ">u2", "U32": ">u4", "U64": ">u8", "R64": None}


def parse_header(raw: bytes, name: str) -> tuple[int, int, int, str]:
    """(header bytes, width, height, data type) from the first frame's header."""
    text = raw.decode("ascii", errors="replace")
    fields = text.split(",")
    if not text.startswith("MQ1") or len(fields) < 7:
        raise CorruptFileError(
            f"{name}: not a Merlin .mib file (no 'MQ1' frame header at the start)")
    try:
        header_len = int(fields[2])
        width, height = int(fields[4]), int(fields[5])
    except ValueError as exc:
        raise CorruptFileError(f"{name}: unreadable .mib frame header {text[:60]!r}") from exc
    kind = fields[6].strip()
    if kind not in _DTYPES or _DTYPES[kind] is None:
        raise UnsupportedFormatError(
            f"{name}: .mib data type {kind!r} (raw/1-bit mode) is not supported: convert the "
            "file with the Merlin software or rosettasciio (pip install rosettasciio; "
            "rsciio.quantumdetector.file_reader) and save the counts as .npy or HDF5")
    if header_len <= 0 or width <= 0 or height <= 0:
        raise CorruptFileError(f"{name}: implausible .mib header {text[:60]!r}")
    return header_len, width, height, kind


def hdr_scan_shape(path: Path) -> tuple[int, int] | None:
    """(rows, cols) from the Merlin ``.hdr`` file next to ``path``; None if it says nothing.

    A line trigger records ``Frames per Trigger`` frames per scan line; a pixel
    trigger (1 frame per trigger) does not say the line length.
    """
    hdr = path.with_suffix(".hdr")
    if not hdr.is_file():
        return None
    values: dict[str, str] = {}
    try:
        for line in hdr.read_text(encoding="ascii", errors="replace").splitlines():
            key, sep, value = line.partition("\t")
            if sep:
                values[key.strip().rstrip(":")] = value.strip()
        per_line = int(values["Frames per Trigger (Number)"])
        frames = int(values["Frames in Acquisition (Number)"])
    except (OSError, KeyError, ValueError):
        return None
    if per_line <= 1 or frames <= 0 or frames % per_line:
        return None
    return (frames // per_line, per_line)


def load_mib(path: Path, opts: LoadOptions) -> Dataset4D:
    name = path.name
    with open(path, "rb") as fh:
        head = fh.read(2048)
    header_len, width, height, kind = parse_header(head, name)
    dtype = np.dtype(_DTYPES[kind])
    frame_bytes = header_len + width * height * dtype.itemsize
    size = path.stat().st_size
    n_frames, rest = divmod(size, frame_bytes)
    if rest:
        raise CorruptFileError(
            f"{name}: {size} bytes is not a whole number of {frame_bytes}-byte frames "
            f"({n_frames} complete + {rest} bytes): the file is truncated; re-copy it")
    if n_frames == 0:
        raise CorruptFileError(f"{name}: no complete frame in the file")
    record = np.dtype([("header", f"S{header_len}"), ("data", dtype, (height, width))])
    mm = np.memmap(path, dtype=record, mode="r", shape=(n_frames,))
    scan_shape = opts.scan_shape or hdr_scan_shape(path)
    source = ScanSource(mm["data"], scan_shape, name,
                        flip=resolve_flip(opts.flip, "mib"))
    return stream_dataset(source, opts, None)

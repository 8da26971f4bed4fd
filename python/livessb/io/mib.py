"""Quantum Detectors Merlin ``.mib`` files (counting mode, U08/U16/U32 frames).

A ``.mib`` file is a sequence of frames, each an ASCII header that starts with
``MQ1,<seq>,<header bytes>,<chips>,<width>,<height>,<dtype>,...`` followed by
big-endian pixel data. The file is memory-mapped and read in chunks; the scan
shape is not stored in it, so ``scan_shape=(rows, cols)`` is required. Raw
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
    source = ScanSource(mm["data"], opts.scan_shape, name)
    return stream_dataset(source, opts, None)

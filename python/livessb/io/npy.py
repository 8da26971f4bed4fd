"""NumPy ``.npy`` (memory-mapped) and ``.npz`` loaders."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ..dataset import Dataset4D
from .errors import CorruptFileError, FileFormatError
from .metadata import FileCalibration, parse_attrs
from .options import LoadOptions
from .source import ScanSource
from .stream import stream_dataset


def load_npy(path: Path, opts: LoadOptions) -> Dataset4D:
    """``.npy``: memory-mapped (``mmap_mode="r"``); a region is a view, read lazily.

    Without binning/cropping and with a supported dtype the counts stay a memmap;
    the file is still read once to check for NaN frames, saturation and dead rows.
    """
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise CorruptFileError(
            f"{path.name}: cannot read it as a .npy file ({exc}): the file is truncated or "
            "not a NumPy array; re-save it with numpy.save") from exc
    source = ScanSource(arr, opts.scan_shape, path.name)
    return stream_dataset(source, opts, None, allow_view=True)


def load_npz(path: Path, opts: LoadOptions, dataset_path: str | None) -> Dataset4D:
    """``.npz``: the ≥3D member (or ``dataset_path=`` key); small members are metadata.

    Scalars such as ``voltage_kV``/``semiangle_mrad``/``scan_step_A`` stored next to
    the counts, or a ``metadata``/``calibration`` member holding a JSON object, fill
    the calibration. A member is decompressed whole (NPZ cannot be read partially).
    """
    try:
        npz = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise CorruptFileError(
            f"{path.name}: cannot read it as a .npz archive ({exc}): the file is truncated or "
            "corrupt; re-save it with numpy.savez") from exc
    with npz:
        try:
            names = list(npz.files)
            key = _choose_member(npz, names, dataset_path, path.name)
            arr = npz[key]
            meta = _npz_metadata(npz, [n for n in names if n != key])
        except (zipfile.BadZipFile, EOFError, OSError) as exc:
            raise CorruptFileError(
                f"{path.name}: a member of the archive is corrupt ({exc}): re-save the file"
            ) from exc
    source = ScanSource(arr, opts.scan_shape, f"{path.name}[{key}]")
    return stream_dataset(source, opts, parse_attrs(meta, f"{path.name}"), allow_view=True)


def read_npz_metadata(path: Path) -> FileCalibration:
    """The calibration the archive's small members give (the counts are not read)."""
    with np.load(path, allow_pickle=False) as npz:
        return parse_attrs(_npz_metadata(npz, list(npz.files)), path.name)


def _choose_member(npz: Any, names: list[str], dataset_path: str | None, name: str) -> str:
    if dataset_path is not None:
        key = dataset_path.strip("/")
        if key not in names:
            raise FileFormatError(
                f"{name}: no member {dataset_path!r}; the archive holds {names}")
        return key
    shapes: dict[str, tuple[int, ...]] = {}
    for n in names:
        try:
            shapes[n] = _member_shape(npz, n)
        except Exception:
            continue
    cands = {n: s for n, s in shapes.items() if len(s) in (3, 4)}
    if not cands:
        raise FileFormatError(
            f"{name}: no 3D or 4D array in the archive (members: "
            f"{ {n: s for n, s in shapes.items()} }); save the counts as a 4D array")
    sizes = {n: int(np.prod(s)) for n, s in cands.items()}
    best = max(sizes.values())
    top = [n for n, v in sizes.items() if v == best]
    if len(top) > 1:
        raise FileFormatError(
            f"{name}: several arrays could be the counts {top}: pass dataset_path='<member>'")
    return top[0]


def _member_shape(npz: Any, member: str) -> tuple[int, ...]:
    """Shape from the member's .npy header without decompressing the data."""
    with npz.zip.open(member + ".npy") as fh:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, _, _ = np.lib.format.read_array_header_1_0(fh)
        else:
            shape, _, _ = np.lib.format.read_array_header_2_0(fh)
    return tuple(int(s) for s in shape)


def _npz_metadata(npz: Any, names: list[str]) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for n in names:
        try:
            if int(np.prod(_member_shape(npz, n))) > 16:
                continue
            value = npz[n]
        except Exception:
            continue
        if n.lower() in ("metadata", "calibration") and value.dtype.kind in "SU":
            try:
                parsed = json.loads(str(value.reshape(-1)[0]))
            except (ValueError, IndexError):
                continue
            if isinstance(parsed, dict):
                for k, v in parsed.items():
                    meta.setdefault(str(k), v)
            continue
        meta[n] = value
    return meta

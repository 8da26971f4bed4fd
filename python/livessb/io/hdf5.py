"""HDF5 loader: generic files and Dectris/Arina (NeXus) master files.

* Generic: the counts are the largest numeric dataset with 3 or 4 dimensions;
  when two candidates tie, ``dataset_path=`` is required (the error lists them).
* Dectris/Arina master: ``/entry/data/data_000001, data_000002, ...`` (external
  links to the data files, which must sit next to the master) are concatenated
  in order. Frames are usually bitshuffle-LZ4 compressed; ``hdf5plugin`` is
  imported so that h5py can decompress them.
* Only the HDF5 chunks that intersect the requested ``scan_region`` are read.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..dataset import Dataset4D
from ._common import (
    CorruptFileError,
    FileFormatError,
    LoadOptions,
    ScanSource,
    attrs_dict,
    stream_dataset,
)
from .metadata import FileCalibration, parse_attrs

_DECTRIS_LINK = re.compile(r"^data_\d{6}$")
_METADATA_GROUP_HINTS = (
    "instrument", "metadata", "calibration", "microscope", "beam", "detector", "optics",
    "acquisition", "experiment", "scan", "source")
_MAX_METADATA_OBJECTS = 5000


def _h5py() -> Any:
    import h5py
    import hdf5plugin  # noqa: F401  (registers bitshuffle/LZ4 and other filters)

    return h5py


@contextlib.contextmanager
def open_hdf5(source: Any, name: str) -> Iterator[Any]:
    """Open a path or binary file object read-only; corrupt/truncated files -> CorruptFileError."""
    h5py = _h5py()
    try:
        f = h5py.File(source, "r")
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        raise CorruptFileError(
            f"{name}: cannot open it as HDF5 ({exc}): the file is truncated, corrupt or still "
            "being written; re-copy or re-export it (check its size against the original)"
        ) from exc
    try:
        yield f
    finally:
        f.close()


def load_hdf5(source: Any, opts: LoadOptions, dataset_path: str | None,
              name: str) -> Dataset4D:
    """Open ``source`` (path or binary file object) and load it (EMD layout detected)."""
    from .emd import emd_groups, load_emd_file

    base = Path(source).parent if isinstance(source, str | Path) else Path.cwd()
    with open_hdf5(source, name) as f:
        if emd_groups(f):
            return load_emd_file(f, opts, dataset_path, name)
        return load_hdf5_file(f, opts, dataset_path, name, base)


def load_hdf5_file(f: Any, opts: LoadOptions, dataset_path: str | None, name: str,
                   base: Path) -> Dataset4D:
    """Load from an open ``h5py.File``; ``base`` is where external data files are looked for."""
    with contextlib.ExitStack() as stack:
        master = None if dataset_path is not None else dectris_links(f)
        if master:
            array: Any = ConcatFrames(_open_links(f, master, base, stack, name), name)
            cal = collect_metadata(f, None, name)
            data_name = f"{name}:/entry/data/data_*"
        else:
            dset = find_dataset(f, dataset_path, name)
            array = dset
            cal = collect_metadata(f, dset, name)
            data_name = f"{name}:{dset.name}"
        src = ScanSource(array, opts.scan_shape, data_name)
        return stream_dataset(src, opts, cal)


def is_numeric_dataset(obj: Any) -> bool:
    h5py = _h5py()
    return (isinstance(obj, h5py.Dataset) and obj.dtype.kind in "uifb"
            and obj.dtype.fields is None)


def candidates(f: Any) -> list[tuple[str, tuple[int, ...], str]]:
    """Every numeric dataset with 3 or 4 dimensions: (path, shape, dtype)."""
    found: list[tuple[str, tuple[int, ...], str]] = []

    def visit(path: str, obj: Any) -> None:
        if is_numeric_dataset(obj) and obj.ndim in (3, 4):
            found.append(("/" + path, tuple(int(s) for s in obj.shape), str(obj.dtype)))

    f.visititems(visit)
    return found


def _describe(cands: list[tuple[str, tuple[int, ...], str]]) -> str:
    return "; ".join(f"{p} {s} {d}" for p, s, d in cands) or "none"


def find_dataset(f: Any, dataset_path: str | None, name: str) -> Any:
    """The counts dataset: ``dataset_path`` if given, else the unique largest 3D/4D one."""
    h5py = _h5py()
    if dataset_path is not None:
        try:
            obj = f.get(dataset_path)
        except (KeyError, OSError, ValueError) as exc:
            raise FileFormatError(
                f"{name}: cannot open {dataset_path!r} ({exc}); 3D/4D datasets in the file: "
                f"{_describe(candidates(f))}") from exc
        if obj is None:
            raise FileFormatError(
                f"{name}: no dataset at dataset_path={dataset_path!r}; 3D/4D datasets in the "
                f"file: {_describe(candidates(f))}")
        if isinstance(obj, h5py.Group):
            if "data" in obj and is_numeric_dataset(obj["data"]):
                obj = obj["data"]
            else:
                inside = [c for c in candidates(f) if c[0].startswith(obj.name.rstrip("/") + "/")]
                if len(inside) == 1:
                    return f[inside[0][0]]
                raise FileFormatError(
                    f"{name}: {dataset_path!r} is a group; pass the path of the counts dataset "
                    f"inside it: {_describe(inside)}")
        if not is_numeric_dataset(obj) or obj.ndim not in (3, 4):
            raise FileFormatError(
                f"{name}: {dataset_path!r} is {getattr(obj, 'shape', '?')} "
                f"{getattr(obj, 'dtype', '')}, not 3D/4D numeric counts; candidates: "
                f"{_describe(candidates(f))}")
        return obj
    cands = candidates(f)
    if not cands:
        raise FileFormatError(
            f"{name}: no numeric 3D or 4D dataset found in the file (external links are not "
            "searched): pass dataset_path='/path/to/counts'")
    sizes = [int(np.prod(s)) for _, s, _ in cands]
    best = max(sizes)
    top = [c for c, s in zip(cands, sizes, strict=True) if s == best]
    if len(top) > 1:
        raise FileFormatError(
            f"{name}: several datasets could be the counts: {_describe(top)}; pass "
            "dataset_path= with the one to load")
    return f[top[0][0]]


def dectris_links(f: Any) -> list[str]:
    """Names ``data_000001...`` under ``/entry/data`` of a Dectris/Arina master, in order."""
    h5py = _h5py()
    grp = f.get("/entry/data")
    if grp is None or not isinstance(grp, h5py.Group):
        return []
    return sorted(k for k in grp.keys() if _DECTRIS_LINK.match(k))


def _open_links(f: Any, names: list[str], base: Path, stack: contextlib.ExitStack,
                name: str) -> list[Any]:
    h5py = _h5py()
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


def collect_metadata(f: Any, dset: Any, name: str) -> FileCalibration:
    """Calibration from the dataset's attributes, its parents, and metadata-like groups.

    Priority: the dataset's own attributes, then its parent groups (nearest
    first), then the root, then scalar datasets/attributes in groups whose name
    suggests metadata (``instrument``, ``metadata``, ``beam``, ``detector``...).
    """
    h5py = _h5py()
    cal = FileCalibration()
    if dset is not None:
        cal.update_missing(parse_attrs(attrs_dict(dset), f"{name}:{dset.name}"))
        parent = dset.parent
        while True:
            cal.update_missing(parse_attrs(attrs_dict(parent), f"{name}:{parent.name}"))
            if parent.name == "/":
                break
            parent = parent.parent
    else:
        cal.update_missing(parse_attrs(attrs_dict(f), f"{name}:/"))
    found: dict[str, Any] = {}
    count = 0

    def visit(path: str, obj: Any) -> Any:
        nonlocal count
        count += 1
        if count > _MAX_METADATA_OBJECTS:
            return True  # stop: metadata search is bounded
        lower = path.lower()
        if not any(h in lower for h in _METADATA_GROUP_HINTS):
            return None
        if isinstance(obj, h5py.Group):
            for k, v in attrs_dict(obj).items():
                found.setdefault(f"{path}/{k}", v)
        elif isinstance(obj, h5py.Dataset) and obj.size <= 2 and obj.dtype.fields is None:
            try:
                value = obj[()]
            except Exception:
                return None
            units = obj.attrs.get("units") if "units" in obj.attrs else None
            found.setdefault(path, (value, units) if isinstance(units, str | bytes) else value)
            for k, v in attrs_dict(obj).items():
                if k != "units":
                    found.setdefault(f"{path}/{k}", v)
        return None

    try:
        f.visititems(visit)
    except Exception:  # metadata is best effort; the counts are read separately
        pass
    cal.update_missing(parse_attrs(_last_component_first(found), f"{name}"))
    return cal


def _last_component_first(found: dict[str, Any]) -> dict[str, Any]:
    """Map ``a/b/key`` -> ``key`` (first occurrence wins), keeping the path in messages."""
    out: dict[str, Any] = {}
    for path, value in found.items():
        out.setdefault(path.rsplit("/", 1)[-1], value)
    return out

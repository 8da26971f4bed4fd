"""h5py helpers shared by the HDF5 layouts: open, attributes, and finding the counts."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from .errors import CorruptFileError, FileFormatError


def h5py_module() -> Any:
    import h5py
    import hdf5plugin  # noqa: F401  (registers bitshuffle/LZ4 and other filters)

    return h5py


@contextlib.contextmanager
def open_hdf5(source: Any, name: str) -> Iterator[Any]:
    """Open a path or binary file object read-only; corrupt/truncated files -> CorruptFileError."""
    h5py = h5py_module()
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

def is_numeric_dataset(obj: Any) -> bool:
    h5py = h5py_module()
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


def describe_candidates(cands: list[tuple[str, tuple[int, ...], str]]) -> str:
    return "; ".join(f"{p} {s} {d}" for p, s, d in cands) or "none"


def find_dataset(f: Any, dataset_path: str | None, name: str) -> Any:
    """The counts dataset: ``dataset_path`` if given, else the unique largest 3D/4D one."""
    h5py = h5py_module()
    if dataset_path is not None:
        try:
            obj = f.get(dataset_path)
        except (KeyError, OSError, ValueError) as exc:
            raise FileFormatError(
                f"{name}: cannot open {dataset_path!r} ({exc}); 3D/4D datasets in the file: "
                f"{describe_candidates(candidates(f))}") from exc
        if obj is None:
            raise FileFormatError(
                f"{name}: no dataset at dataset_path={dataset_path!r}; 3D/4D datasets in the "
                f"file: {describe_candidates(candidates(f))}")
        if isinstance(obj, h5py.Group):
            if "data" in obj and is_numeric_dataset(obj["data"]):
                obj = obj["data"]
            else:
                inside = [c for c in candidates(f) if c[0].startswith(obj.name.rstrip("/") + "/")]
                if len(inside) == 1:
                    return f[inside[0][0]]
                raise FileFormatError(
                    f"{name}: {dataset_path!r} is a group; pass the path of the counts dataset "
                    f"inside it: {describe_candidates(inside)}")
        if not is_numeric_dataset(obj) or obj.ndim not in (3, 4):
            raise FileFormatError(
                f"{name}: {dataset_path!r} is {getattr(obj, 'shape', '?')} "
                f"{getattr(obj, 'dtype', '')}, not 3D/4D numeric counts; candidates: "
                f"{describe_candidates(candidates(f))}")
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
            f"{name}: several datasets could be the counts: {describe_candidates(top)}; pass "
            "dataset_path= with the one to load")
    return f[top[0][0]]


def attrs_dict(obj: Any) -> dict[str, Any]:
    """HDF5 attributes as a plain dict (unreadable attributes are skipped)."""
    out: dict[str, Any] = {}
    try:
        keys = list(obj.attrs.keys())
    except Exception:
        return out
    for k in keys:
        try:
            out[k] = obj.attrs[k]
        except Exception:  # unreadable attribute types: metadata is best effort
            continue
    return out

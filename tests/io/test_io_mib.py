"""Merlin .mib files written in the counting-mode layout (ASCII header + big-endian frame)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from livessb.io import CorruptFileError, UnsupportedFormatError, load


def _write_mib(path: Path, frames: np.ndarray, kind: str = "U16") -> None:
    n, h, w = frames.shape
    big = frames.astype({"U08": ">u1", "U16": ">u2", "U32": ">u4"}.get(kind, ">u2"))
    with open(path, "wb") as fh:
        for i in range(n):
            head = (f"MQ1,{i + 1:06d},00384,01,{w:04d},{h:04d},{kind},   1x1,01,"
                    "2020-01-01 00:00:00.000000,0.001,0,0,0").encode()
            fh.write(head.ljust(384, b"\x00"))
            fh.write(big[i].tobytes())


@pytest.mark.parametrize("kind,dtype", [("U08", np.uint8), ("U16", np.uint16),
                                        ("U32", np.uint32)])
def test_mib_roundtrip(tmp_path: Path, make_counts: Any, cal: dict[str, Any], kind: str,
                       dtype: Any) -> None:
    counts = make_counts(dtype=dtype)
    _write_mib(tmp_path / "c.mib", counts.reshape(64, 16, 16), kind)
    ds = load(tmp_path / "c.mib", scan_shape=(8, 8), progress=False, **cal)
    assert ds.counts.dtype == dtype
    np.testing.assert_array_equal(ds.counts, counts)
    ds = load(tmp_path / "c.mib", scan_shape=(8, 8), scan_region=(0, 4, 4, 8), progress=False,
              **cal)
    np.testing.assert_array_equal(ds.counts, counts[:4, 4:])


def test_mib_errors(tmp_path: Path, make_counts: Any, cal: dict[str, Any]) -> None:
    frames = make_counts().reshape(64, 16, 16)
    _write_mib(tmp_path / "c.mib", frames)
    raw = (tmp_path / "c.mib").read_bytes()
    (tmp_path / "t.mib").write_bytes(raw[:-100])
    with pytest.raises(CorruptFileError, match="truncated"):
        load(tmp_path / "t.mib", scan_shape=(8, 8), **cal)
    _write_mib(tmp_path / "r.mib", frames, kind="R64")
    with pytest.raises(UnsupportedFormatError, match="rosettasciio"):
        load(tmp_path / "r.mib", scan_shape=(8, 8), **cal)
    (tmp_path / "x.mib").write_bytes(b"hello world" * 10)
    with pytest.raises(CorruptFileError, match="MQ1"):
        load(tmp_path / "x.mib", scan_shape=(8, 8), **cal)

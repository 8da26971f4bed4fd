"""Merlin .mib files written in the counting-mode layout (ASCII header + big-endian frame).

Orientation: livessb's default matches rosettasciio's reader (checked against it on
the files written here when rosettasciio is installed); ``flip="libertem"`` gives the
stored order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from livessb.io import CorruptFileError, DatasetError, UnsupportedFormatError, load
from livessb.io.mib import hdr_scan_shape


def _write_mib(path: Path, frames: np.ndarray, kind: str = "U16") -> None:
    """Frames as the Merlin stores them (first stored row first); headers rosettasciio parses."""
    n, h, w = frames.shape
    big = frames.astype({"U08": ">u1", "U16": ">u2", "U32": ">u4"}.get(kind, ">u2"))
    with open(path, "wb") as fh:
        for i in range(n):
            head = (f"MQ1,{i + 1:06d},00384,01,{w:04d},{h:04d},{kind},   1x1,01,"
                    "2020-01-01 00:00:00.000000,0.001000,0,0,0,1.2E+2,5.11E+2,0,0,0,0,0,0,"
                    f"3RX,175,511,000,000,000,000,000,000,125,255,MQ1A,"
                    f"2020-01-01T00:00:{i * 1e-3:09.6f}Z,1000000ns,12,").encode()
            fh.write(head.ljust(384, b"\x00"))
            fh.write(big[i].tobytes())


def _write_hdr(path: Path, frames: int, per_line: int) -> None:
    path.write_text(f"HDR,\t\nFrames in Acquisition (Number):\t{frames}\n"
                    f"Frames per Trigger (Number):\t{per_line}\nEnd\t\n")


def _marked(counts: np.ndarray) -> np.ndarray:
    """Counts with a bright pixel in the top-left quadrant: any flip moves it."""
    out = counts.copy()
    out[..., 2, 3] = 200
    return out


@pytest.mark.parametrize("kind,dtype", [("U08", np.uint8), ("U16", np.uint16),
                                        ("U32", np.uint32)])
def test_mib_roundtrip(tmp_path: Path, make_counts: Any, cal: dict[str, Any], kind: str,
                       dtype: Any) -> None:
    stored = _marked(make_counts(dtype=dtype))  # as the camera stores them
    _write_mib(tmp_path / "c.mib", stored.reshape(64, 16, 16), kind)
    ds = load(tmp_path / "c.mib", scan_shape=(8, 8), progress=False, **cal)
    assert ds.counts.dtype == dtype
    np.testing.assert_array_equal(ds.counts, stored[:, :, ::-1, :])  # row 0 = top
    assert ds.counts[0, 0, 16 - 1 - 2, 3] == 200
    ds = load(tmp_path / "c.mib", scan_shape=(8, 8), scan_region=(0, 4, 4, 8), progress=False,
              **cal)
    np.testing.assert_array_equal(ds.counts, stored[:4, 4:, ::-1, :])
    for name in ("libertem", "none"):
        ds = load(tmp_path / "c.mib", scan_shape=(8, 8), progress=False, flip=name, **cal)
        np.testing.assert_array_equal(ds.counts, stored)
    ds = load(tmp_path / "c.mib", scan_shape=(8, 8), progress=False, flip="both", **cal)
    np.testing.assert_array_equal(ds.counts, stored[:, :, ::-1, ::-1])


def test_mib_matches_rosettasciio(tmp_path: Path, make_counts: Any,
                                  cal: dict[str, Any], tool: Any) -> None:
    qd = tool("rsciio.quantumdetector")
    stored = _marked(make_counts(scan=(6, 8)))
    _write_mib(tmp_path / "c.mib", stored.reshape(48, 16, 16))
    ours = load(tmp_path / "c.mib", scan_shape=(6, 8), progress=False, **cal).counts
    # rosettasciio's navigation_shape is (x, y) = (cols, rows).
    theirs = qd.file_reader(str(tmp_path / "c.mib"), navigation_shape=(8, 6))[0]["data"]
    assert theirs.shape == ours.shape
    np.testing.assert_array_equal(ours, theirs)
    raw = np.asarray(qd.load_mib_data(str(tmp_path / "c.mib"), navigation_shape=(8, 6)))
    libertem = load(tmp_path / "c.mib", scan_shape=(6, 8), progress=False, flip="libertem",
                    **cal).counts
    np.testing.assert_array_equal(libertem, raw)  # the stored order, LiberTEM's view
    # With the acquisition's .hdr file both read the scan shape from it.
    _write_hdr(tmp_path / "c.hdr", 48, 8)
    ours = load(tmp_path / "c.mib", progress=False, **cal).counts
    theirs = qd.file_reader(str(tmp_path / "c.mib"))[0]["data"]
    assert ours.shape == theirs.shape == (6, 8, 16, 16)
    np.testing.assert_array_equal(ours, theirs)


def test_mib_hdr_scan_shape(tmp_path: Path, make_counts: Any, cal: dict[str, Any]) -> None:
    frames = make_counts(scan=(4, 6)).reshape(24, 16, 16)
    _write_mib(tmp_path / "c.mib", frames)
    assert hdr_scan_shape(tmp_path / "c.mib") is None
    with pytest.raises(DatasetError, match="scan_shape"):
        load(tmp_path / "c.mib", progress=False, **cal)
    _write_hdr(tmp_path / "c.hdr", 24, 6)
    assert hdr_scan_shape(tmp_path / "c.mib") == (4, 6)
    assert load(tmp_path / "c.mib", progress=False, **cal).scan_shape == (4, 6)
    # The user's scan_shape wins; a pixel trigger (1 frame per trigger) says nothing.
    assert load(tmp_path / "c.mib", scan_shape=(6, 4), progress=False, **cal).scan_shape == (6, 4)
    _write_hdr(tmp_path / "c.hdr", 24, 1)
    assert hdr_scan_shape(tmp_path / "c.mib") is None


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
    with pytest.raises(DatasetError, match="flip='upside' is not an orientation"):
        load(tmp_path / "c.mib", scan_shape=(8, 8), flip="upside", **cal)

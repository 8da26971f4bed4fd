"""Exports: .npy/.tif/.png contents, calibration metadata, atomicity, clear errors."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import tifffile
from PIL import Image

from livessb.export import ExportError, png_levels, save_reconstruction
from livessb.results import Reconstruction


@pytest.fixture
def rec() -> Reconstruction:
    rng = np.random.default_rng(3)
    obj = (rng.uniform(0.8, 1.2, (12, 10)) * np.exp(1j * rng.normal(0, 0.4, (12, 10))))
    return Reconstruction(object=obj.astype(np.complex64),
                          params={"C10": 12.5, "C12": 3.0, "phi12": 0.2}, upsample=2,
                          sampling_A=(0.25, 0.3), method="ssb", origin_px=(4, 6))


def test_npy_phase_and_object(tmp_path: Path, rec: Reconstruction) -> None:
    p = save_reconstruction(rec, tmp_path / "phase.npy")
    assert p == tmp_path / "phase.npy"
    phase = np.load(p)
    assert phase.dtype == np.float32
    np.testing.assert_array_equal(phase, rec.phase)
    obj = np.load(rec.save(tmp_path / "obj.npy", what="object"))
    assert obj.dtype == np.complex64
    np.testing.assert_array_equal(obj, rec.object)


@pytest.mark.parametrize("suffix", [".tif", ".tiff", ".TIF"])
def test_tiff_float32_imagej_with_calibration(tmp_path: Path, rec: Reconstruction,
                                              suffix: str) -> None:
    p = rec.save(tmp_path / f"phase{suffix}")
    with tifffile.TiffFile(p) as tif:
        data = tif.asarray()
        ij = tif.imagej_metadata
        page: Any = tif.pages[0]
        description = page.tags["ImageDescription"].value
        xres, yres = page.tags["XResolution"].value, page.tags["YResolution"].value
    assert data.dtype == np.float32
    np.testing.assert_array_equal(data, rec.phase)
    # ImageJ's own hyperstack header: its pixel width is 1/XResolution in `unit`
    assert description.startswith("ImageJ=") and "\nunit=nm" in description
    assert description.isascii()  # ImageJ decodes the description as Latin-1
    assert ij is not None and ij["unit"] == "nm"
    assert 10 * xres[1] / xres[0] == pytest.approx(0.3, rel=1e-9)  # Å per pixel, columns
    assert 10 * yres[1] / yres[0] == pytest.approx(0.25, rel=1e-9)  # rows
    meta = json.loads(ij["Info"])  # the calibration, as ImageJ's Show Info text
    assert meta["pixel_size_A"] == [0.25, 0.3]
    assert meta["params"] == {"C10": 12.5, "C12": 3.0, "phi12": 0.2}
    assert meta["units"] == "rad" and meta["upsample"] == 2 and meta["origin_px"] == [4, 6]
    amplitude = tifffile.imread(rec.save(tmp_path / "amp.tif", what="amplitude"))
    np.testing.assert_allclose(amplitude, np.abs(rec.object), rtol=1e-6)


def test_tiff_object_complex(tmp_path: Path, rec: Reconstruction) -> None:
    """ImageJ has no complex type: a plain TIFF, the calibration JSON its description."""
    with tifffile.TiffFile(rec.save(tmp_path / "obj.tif", what="object")) as tif:
        data = tif.asarray()
        shaped = tif.shaped_metadata
        page: Any = tif.pages[0]
        assert page.tags["ResolutionUnit"].value == 3  # centimetre
        xres = page.tags["XResolution"].value
    assert data.dtype == np.complex64
    np.testing.assert_array_equal(data, rec.object)
    assert shaped is not None and shaped[0]["pixel_size_A"] == [0.25, 0.3]
    assert shaped[0]["what"] == "object"
    assert xres[0] / xres[1] == pytest.approx(1 / 0.3e-8, rel=1e-6)  # px per cm, columns


def test_png_8bit_percentile_contrast(tmp_path: Path, rec: Reconstruction) -> None:
    p = rec.save(tmp_path / "phase.png", percentiles=(1, 99))
    with Image.open(p) as im:
        assert im.mode == "L" and im.size == (10, 12)
        levels = np.asarray(im)
        meta = json.loads(im.info["livessb"])
    np.testing.assert_array_equal(levels, png_levels(rec.phase, (1, 99)))
    assert levels.min() == 0 and levels.max() == 255
    assert meta["pixel_size_A"] == [0.25, 0.3] and meta["percentiles"] == [1, 99]
    flat = png_levels(np.zeros((4, 4), np.float32))
    assert flat.dtype == np.uint8 and (flat == 0).all()
    with pytest.raises(ExportError, match="PNG"):
        rec.save(tmp_path / "obj.png", what="object")
    with pytest.raises(ExportError, match="percentiles"):
        rec.save(tmp_path / "bad.png", percentiles=(90, 10))


def test_unknown_suffix_and_options(tmp_path: Path, rec: Reconstruction) -> None:
    with pytest.raises(ExportError, match=r"unknown suffix '\.jpg'.*\.npy, \.tif, \.tiff, "
                       r"\.png, \.emd, \.h5, \.hdf5"):
        rec.save(tmp_path / "x.jpg")
    with pytest.raises(ExportError, match="unknown suffix"):
        rec.save(tmp_path / "noext")
    with pytest.raises(ExportError, match="what="):
        rec.save(tmp_path / "x.npy", what="hologram")
    with pytest.raises(ExportError, match="unknown export option"):
        rec.save(tmp_path / "x.npy", dpi=300)
    with pytest.raises(ExportError, match=r"\['percentiles'\] for EMD"):
        rec.save(tmp_path / "x.emd", percentiles=(1, 99))
    with pytest.raises(ExportError, match="what="):
        rec.save(tmp_path / "x.h5", what="hologram")
    with pytest.raises(FileNotFoundError, match=r"the folder '.*missing' does not exist \(livessb "
                       r"creates no folders\): create it first or choose another path"):
        rec.save(tmp_path / "missing" / "x.npy")  # the folder rule (atomic.require_folder)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("suffix,module,func", [
    (".tif", tifffile, "imwrite"), (".npy", np, "save"), (".png", Image.Image, "save"),
    (".emd", h5py, "File")])
def test_failed_export_leaves_existing_file_untouched(
        tmp_path: Path, rec: Reconstruction, monkeypatch: Any, suffix: str, module: Any,
        func: str) -> None:
    target = tmp_path / f"result{suffix}"
    target.write_bytes(b"precious earlier result")
    before = os.stat(target).st_mtime_ns

    def broken(*args: Any, **kwargs: Any) -> None:
        fh = next((a for a in args if hasattr(a, "write")), None)
        if fh is not None:
            fh.write(b"half-written garbage")
        raise OSError("disk full")

    monkeypatch.setattr(module, func, broken)
    with pytest.raises(OSError, match="disk full"):
        rec.save(target)
    assert target.read_bytes() == b"precious earlier result"
    assert os.stat(target).st_mtime_ns == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]  # no temp left


def test_overwrite_replaces_atomically(tmp_path: Path, rec: Reconstruction) -> None:
    target = tmp_path / "phase.npy"
    target.write_bytes(b"old")
    rec.save(target)
    np.testing.assert_array_equal(np.load(target), rec.phase)
    assert [p.name for p in tmp_path.iterdir()] == ["phase.npy"]

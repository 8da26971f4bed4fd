"""Writing reconstructions: ``.npy``, 32-bit ``.tif``/``.tiff`` (ImageJ hyperstack),
8-bit ``.png``, and EMD/HDF5 (``.emd``/``.h5``/``.hdf5``, through ``export_hdf5``).

Every write is atomic: the data go to a temporary file in the target directory,
which then replaces the target with ``os.replace``. A failing export leaves an
existing file untouched and no temporary file behind.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from .atomic import atomic_write
from .export_hdf5 import EMD_SUFFIXES, WHAT, save_reconstruction_emd
from .render import colorize, draw_scale_bar, to_uint8

if TYPE_CHECKING:
    from .results import Reconstruction

SUFFIXES: tuple[str, ...] = (".npy", ".tif", ".tiff", ".png", *EMD_SUFFIXES)
PNG_OPTIONS: tuple[str, ...] = ("limits", "colormap", "scale_bar")
EMD_OPTIONS: tuple[str, ...] = ("name", "compression")
# ImageJ reads the unit from its description through java.util.Properties, which decodes
# non-ASCII bytes as Latin-1 ("Å" as UTF-8 becomes "Ã…"), and Bio-Formats (Fiji's other
# TIFF opener) knows unit names, not escapes: nm is what both show correctly.
IMAGEJ_UNIT = "nm"
A_PER_IMAGEJ_UNIT = 10.0


class ExportError(ValueError):
    """The export cannot be done as asked (suffix, content); the message names the fix."""


def _metadata(rec: Reconstruction, what: str, units: str) -> dict[str, Any]:
    return {
        "livessb": "reconstruction",
        "what": what,
        "units": units,
        "pixel_size_A": [float(rec.sampling_A[0]), float(rec.sampling_A[1])],
        "pixel_size_unit": "Angstrom",
        "upsample": int(rec.upsample),
        "method": str(rec.method),
        "origin_px": [int(rec.origin_px[0]), int(rec.origin_px[1])],
        "params": {str(k): float(v) for k, v in rec.params.items()},
    }


def _array(rec: Reconstruction, what: str) -> tuple[np.ndarray, str]:
    if what == "phase":
        return np.ascontiguousarray(rec.phase, dtype=np.float32), "rad"
    if what == "object":
        return np.ascontiguousarray(rec.object, dtype=np.complex64), "complex transmission"
    if what == "amplitude":
        return np.ascontiguousarray(np.abs(rec.object), dtype=np.float32), "amplitude"
    raise ExportError(f"what={what!r} is not one of {WHAT}")


def save_reconstruction(rec: Reconstruction, path: str | Path, what: str = "phase",
                        **opts: Any) -> Path:
    """Write ``rec`` to ``path``; the format follows the suffix.

    * ``.npy``: phase ``float32`` (rad), or the complex64 object (``what="object"``).
    * ``.tif``/``.tiff``: an ImageJ hyperstack of 32-bit floats (phase, amplitude) via
      tifffile: ImageJ and Fiji show the pixel size (``unit=nm`` in the ImageJ
      description, X/YResolution in pixels per nm); the calibration JSON (pixel size Å,
      parameters, upsampling...) is ImageJ's ``Info`` property
      (``tifffile.TiffFile(p).imagej_metadata["Info"]``; Image > Show Info in ImageJ).
      ImageJ has no complex type: ``what="object"`` writes a plain complex64 TIFF with
      the JSON as its image description and the resolution tags in pixels per cm.
    * ``.png``: 8-bit greyscale phase (or amplitude) via Pillow; contrast from
      percentiles ``opts["percentiles"]`` (default ``(0.5, 99.5)``) or fixed
      ``opts["limits"]=(lo, hi)``; ``opts["colormap"]`` (a name in
      ``render.COLORMAPS``) writes RGB, ``opts["scale_bar"]=True`` burns in a scale
      bar of a round length; calibration JSON goes into a ``livessb`` text chunk.
    * ``.emd``/``.h5``/``.hdf5``: EMD 1.0 that py4DSTEM and HyperSpy open
      (``export_hdf5.save_reconstruction_emd``; options ``name=``, ``compression=``).

    Returns the path written. Raises ``ExportError`` (a ``ValueError``) for an
    unknown suffix or ``what``; a failed write leaves an existing file untouched.
    """
    target = Path(path).expanduser()
    suffix = target.suffix.lower()
    if suffix not in SUFFIXES:
        raise ExportError(
            f"cannot export to {target.name!r}: unknown suffix {suffix or '(none)'!r}; use "
            f"one of {', '.join(SUFFIXES)} (or rec.save('name.npy', what='object') for the "
            "complex object)")
    if what not in WHAT:
        raise ExportError(f"what={what!r} is not one of {WHAT}")
    if suffix in EMD_SUFFIXES:
        unknown_emd = set(opts) - set(EMD_OPTIONS)
        if unknown_emd:
            raise ExportError(f"unknown export option(s) {sorted(unknown_emd)} for EMD: use "
                              "name=... (the array's name), compression='gzip'")
        return save_reconstruction_emd(rec, target, what=what, **opts)
    writers: dict[str, Callable[..., None]] = {
        ".npy": _write_npy, ".tif": _write_tiff, ".tiff": _write_tiff, ".png": _write_png}
    data, units = _array(rec, what)
    meta = _metadata(rec, what, units)
    if suffix == ".png" and what == "object":
        raise ExportError(
            "PNG holds 8-bit grey levels only: export what='phase' or 'amplitude' to PNG, "
            "or the complex object to .npy/.tif")
    unknown = set(opts) - {"percentiles", "compression", *PNG_OPTIONS}
    if unknown:
        raise ExportError(
            f"unknown export option(s) {sorted(unknown)}: use percentiles=(lo, hi), "
            "limits=(lo, hi), colormap=..., scale_bar=True for PNG, compression=... for TIFF")
    with atomic_write(target) as fh:
        writers[suffix](fh, data, meta, **opts)
    return target


def _write_npy(fh: IO[bytes], data: np.ndarray, meta: dict[str, Any], **_: Any) -> None:
    np.save(fh, data, allow_pickle=False)


def _write_tiff(fh: IO[bytes], data: np.ndarray, meta: dict[str, Any],
                compression: Any = None, **_: Any) -> None:
    import tifffile

    step_r, step_c = meta["pixel_size_A"]  # X is the columns, Y the rows
    if data.dtype.kind == "c":  # ImageJ has no complex type: a plain TIFF
        px_cm = (1e-8 * step_r, 1e-8 * step_c)
        tifffile.imwrite(
            fh, data, photometric="minisblack", metadata=meta, compression=compression,
            resolution=(1.0 / px_cm[1], 1.0 / px_cm[0]), resolutionunit="CENTIMETER",
            software="livessb")
        return
    px = (step_r / A_PER_IMAGEJ_UNIT, step_c / A_PER_IMAGEJ_UNIT)
    tifffile.imwrite(
        fh, data, imagej=True, compression=compression, resolution=(1.0 / px[1], 1.0 / px[0]),
        metadata={"unit": IMAGEJ_UNIT, "Info": json.dumps(meta)}, software="livessb")


def png_levels(data: np.ndarray, percentiles: tuple[float, float] = (0.5, 99.5)) -> np.ndarray:
    """8-bit grey levels with contrast from ``percentiles`` of the finite values."""
    lo_p, hi_p = (float(p) for p in percentiles)
    if not 0 <= lo_p < hi_p <= 100:
        raise ExportError(f"percentiles must satisfy 0 <= lo < hi <= 100, got {percentiles!r}")
    finite = data[np.isfinite(data)]
    if finite.size == 0:
        return np.zeros(data.shape, dtype=np.uint8)
    lo, hi = np.percentile(finite, [lo_p, hi_p])
    scale = 255.0 / (hi - lo) if hi > lo else 0.0
    scaled = np.nan_to_num((data.astype(np.float64) - lo) * scale, nan=0.0)
    return np.clip(np.rint(scaled), 0, 255).astype(np.uint8)


def _write_png(fh: IO[bytes], data: np.ndarray, meta: dict[str, Any],
               percentiles: tuple[float, float] = (0.5, 99.5),
               limits: tuple[float, float] | None = None, colormap: str | None = None,
               scale_bar: bool = False, **_: Any) -> None:
    from PIL import Image, PngImagePlugin

    if limits is None:
        levels = png_levels(data, percentiles)
        display: dict[str, Any] = {"percentiles": list(percentiles)}
    else:
        lo, hi = (float(x) for x in limits)
        if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
            raise ExportError(f"contrast limits must be finite with lo < hi, got {limits!r}")
        levels, display = to_uint8(data, (lo, hi)), {"limits": [lo, hi]}
    pixels = levels
    if colormap is not None or scale_bar:
        display["colormap"] = colormap or "gray"
        try:  # the levels through the colormap's 256 entries
            pixels = colorize(levels, display["colormap"], (0.0, 255.0))
        except ValueError as exc:
            raise ExportError(str(exc)) from None
        if scale_bar:
            pixels, display["scale_bar"] = draw_scale_bar(pixels, meta["pixel_size_A"][1])
    info = PngImagePlugin.PngInfo()
    info.add_text("livessb", json.dumps({**meta, **display}))
    # No pHYs chunk: Å-scale pixels overflow its pixels-per-metre field; the JSON has them.
    Image.fromarray(pixels).save(fh, format="PNG", pnginfo=info)

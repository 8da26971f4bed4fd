"""``load`` and ``read_metadata``: pick the reader from the suffix (HDF5 layouts: ``hdf5``)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from ..dataset import Dataset4D, DatasetError, check_detector_pixels
from .errors import UnsupportedFormatError
from .hdf5 import load_hdf5, read_hdf5_metadata
from .metadata import CALIBRATION_KEYS, FileCalibration
from .mib import load_mib
from .npy import load_npy, load_npz, read_npz_metadata
from .options import LoadOptions
from .orientation import resolve_flip
from .rsciio_reader import load_rsciio, read_rsciio_metadata, rsciio_readers
from .sidecar import find_sidecar

NPY_SUFFIXES = (".npy",)
NPZ_SUFFIXES = (".npz",)
HDF5_SUFFIXES = (".h5", ".hdf5", ".hdf", ".he5", ".nxs", ".nx5", ".emd", ".h4d", ".py4dstem")
MIB_SUFFIXES = (".mib",)
# Read through rosettasciio (optional): first for HyperSpy's own files, else when
# livessb has no reader of its own.
RSCIIO_FIRST = (".hspy", ".zspy")
RSCIIO_SUFFIXES = (".dm3", ".dm4", ".mrc", ".xml", ".blo", ".ser", ".emi", ".tvips", ".prz",
                   ".app5", ".raw", *RSCIIO_FIRST)
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def load(
    path: str | Path | io.IOBase,
    scan_shape: tuple[int, int] | None = None,
    scan_region: tuple[int, int, int, int] | None = None,
    *,
    dataset_path: str | None = None,
    bin_detector: int | None = None,
    crop_to_bf: bool | int = False,
    progress: bool = True,
    flip: str | None = None,
    sidecar: str | Path | None = None,
    detector_pixels: str = "integrating",
    **calibration: Any,
) -> Dataset4D:
    """Load a 4D-STEM file as a :class:`~livessb.Dataset4D`.

    Parameters
    ----------
    path
        ``.npy``/``.npz``/HDF5 (``.h5``, ``.hdf5``, ``.emd``, Dectris/Arina master)/
        ``.mib``; an open binary file object is read as HDF5.
    scan_shape
        ``(rows, cols)`` for 3D files (a stack of frames); must hold every frame.
    scan_region
        ``(row_start, row_stop, col_start, col_stop)``, stops exclusive: only
        these positions are read (HDF5: only the chunks that intersect them).
    dataset_path
        HDF5 path (or NPZ member) of the counts when the file holds several.
    bin_detector
        Sum ``f x f`` detector pixels (explicit only; sampling becomes ``f`` x).
    crop_to_bf
        ``True`` keeps the BF disk plus a margin (``max(4 px, 0.25 r)``); an int
        is the margin in detector pixels. The sampling is unchanged.
    progress
        Show a tqdm progress bar while reading (``False`` silences it).
    flip
        Detector orientation: ``"rosettasciio"`` (default; ``.mib`` rows reversed so
        that detector row 0 is the top of the camera image, as rosettasciio, HyperSpy
        and pyxem show it), ``"libertem"``/``"none"`` (frames as stored), or an explicit
        ``"rows"``, ``"cols"``, ``"both"`` reversal of the stored frames.
    sidecar
        A JSON/TOML (or Arina metadata ``.h5``) file with the scan shape and
        calibration (``livessb.io.sidecar``); found automatically next to the file
        when named ``<name>.json``/``<name>.toml`` (``<base>.h5`` for Arina).
    detector_pixels
        ``"integrating"`` (a camera: each pixel sums its area) or ``"points"`` (a
        simulator's output read at each pixel's centre; binned pixels integrate);
        crystal mode models it.
    **calibration
        ``voltage_kV``, ``semiangle_mrad``, ``scan_step_A``,
        ``detector_sampling_mrad``: these win over the file's metadata.

    Raises
    ------
    DatasetError
        Missing/invalid calibration, ambiguous or wrong ``dataset_path``
        (``FileFormatError``), bad shapes, NaN frames.
    CorruptFileError
        Truncated or corrupt files, missing linked data files (also an ``OSError``).
    UnsupportedFormatError
        Unknown suffix or an unsupported variant (e.g. raw-mode ``.mib``).
    FileNotFoundError
        The path does not exist.
    """
    opts = LoadOptions(
        scan_shape=_scan_shape(scan_shape),
        scan_region=scan_region, bin_detector=bin_detector, crop_to_bf=crop_to_bf,
        progress=progress, calibration={k: v for k, v in calibration.items() if v is not None})
    unknown = sorted(set(opts.calibration) - set(CALIBRATION_KEYS))
    if unknown:
        raise DatasetError(
            f"unknown keyword(s) {unknown}: calibration keywords are "
            f"{', '.join(CALIBRATION_KEYS)}")
    resolve_flip(flip, "any")  # a bad flip (or detector kind) fails before anything is read
    opts.flip = flip
    check_detector_pixels(detector_pixels)
    ds = _read(path, opts, dataset_path, sidecar)
    # binned pixels sum their bin's area whatever the source's pixels were
    ds.detector_pixels = "integrating" if (bin_detector or 1) > 1 else detector_pixels
    return ds


def _read(path: str | Path | io.IOBase, opts: LoadOptions, dataset_path: str | None,
          sidecar: str | Path | None) -> Dataset4D:
    if not isinstance(path, str | Path):
        if hasattr(path, "read") and hasattr(path, "seek"):
            name = str(getattr(path, "name", "<file object>"))
            return load_hdf5(path, opts, dataset_path, Path(name).name or name)
        raise TypeError(f"path must be a str, Path or binary file object, got {type(path)}")
    p = Path(path).expanduser()
    if not p.exists():
        raise FileNotFoundError(f"no such file: {str(p)!r}")
    suffix = p.suffix.lower()
    if suffix in RSCIIO_FIRST and rsciio_readers(suffix):
        return load_rsciio(p, opts)
    if p.is_dir():
        raise UnsupportedFormatError(
            f"{p} is a directory: pass the file itself (for Dectris data, the *_master.h5 file)")
    side = find_sidecar(p, sidecar)
    if side is not None:
        opts.sidecar = side.calibration
        if opts.scan_shape is None:
            opts.scan_shape = side.scan_shape
    if suffix in NPY_SUFFIXES:
        return load_npy(p, opts)
    if suffix in NPZ_SUFFIXES:
        return load_npz(p, opts, dataset_path)
    if suffix in MIB_SUFFIXES:
        return load_mib(p, opts)
    if suffix in HDF5_SUFFIXES or _is_hdf5(p):
        return load_hdf5(p, opts, dataset_path, p.name)
    if suffix in RSCIIO_SUFFIXES or rsciio_readers(suffix):
        return load_rsciio(p, opts)
    raise UnsupportedFormatError(
        f"{p.name}: unknown file type {suffix!r}: livessb loads .npy, .npz, HDF5 (.h5, .hdf5, "
        ".emd, Dectris/Arina master files) and .mib, and DM3/DM4, MRC, EMPAD, blockfile, "
        ".hspy … through rosettasciio (pip install 'livessb[formats]'); convert other "
        "formats and save the counts with numpy.save")


def _scan_shape(scan_shape: Any) -> tuple[int, int] | None:
    if scan_shape is None:
        return None
    try:
        rows, cols = (int(s) for s in scan_shape)
    except (TypeError, ValueError) as exc:
        raise DatasetError(f"scan_shape must be (rows, cols), got {scan_shape!r}") from exc
    return (rows, cols)


def _is_hdf5(p: Path) -> bool:
    try:
        with open(p, "rb") as fh:
            return fh.read(8) == _HDF5_SIGNATURE
    except OSError:
        return False


def read_metadata(path: str | Path, dataset_path: str | None = None) -> dict[str, Any]:
    """The calibration a file's metadata provides (no counts are read), for inspection.

    Returns ``FileCalibration.as_dict()``: values in livessb units (``None`` where
    the file says nothing), ``problems`` (values present but unusable) and
    ``sources`` (where each value came from).
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in NPY_SUFFIXES + MIB_SUFFIXES:
        return FileCalibration().as_dict()
    if suffix in NPZ_SUFFIXES:
        return read_npz_metadata(p).as_dict()
    if (suffix in RSCIIO_FIRST and rsciio_readers(suffix)) or (
            suffix in RSCIIO_SUFFIXES and not _is_hdf5(p)):
        return read_rsciio_metadata(p).as_dict()
    return read_hdf5_metadata(p, dataset_path, p.name).as_dict()

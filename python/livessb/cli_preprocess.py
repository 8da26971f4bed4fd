"""The command line's preprocessing flags (descan, dose normalisation, bad detector
pixels) and the ``Preprocessing`` record they make (docs/preprocessing.md)."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .cli_text import UsageError
from .preprocess import Preprocessing
from .preprocess.options import DESCAN_MODELS

DESCAN_CHOICES = (*DESCAN_MODELS, "off")
_PIXEL = re.compile(r"^\s*(\d+)\s*,\s*(\d+)\s*$")


def add_preprocessing_arguments(f: argparse.ArgumentParser) -> None:
    g = f.add_argument_group(
        "preprocessing (before the spectra; with --calibration the file's recorded "
        "corrections are reused unless one of these is given)")
    g.add_argument("--descan", choices=DESCAN_CHOICES, default=None,
                   help="the BF disk moving on the detector over the scan: measure its "
                        "centre, fit a plane or a smooth polynomial surface, shift the frames "
                        "back (sub-pixel); off: leave the frames as they are (default: plane)")
    g.add_argument("--descan-degree", type=int, metavar="N", default=None,
                   help="polynomial degree (1-5) of --descan smooth (default: 3)")
    g.add_argument("--dose-normalise", "--dose-normalize", dest="dose_normalise",
                   action="store_true",
                   help="scale each frame to the mean frame total (beam-current "
                        "fluctuation; default: off)")
    g.add_argument("--mask-pixels", action="append", metavar="ROW,COL[;ROW,COL...]",
                   help="detector pixels to treat as bad (repaired from their neighbours), "
                        "row and column in detector pixels as loaded (after --bin-detector "
                        "and --crop-to-bf); may be repeated")
    g.add_argument("--detector-mask", metavar="FILE",
                   help=".npy array of the detector's shape as loaded, True (1) = use the "
                        "pixel, False (0) = bad")
    g.add_argument("--no-auto-mask", action="store_true",
                   help="do not search for hot and dead detector pixels (default: found "
                        "automatically and repaired)")


def given(args: argparse.Namespace) -> bool:
    """Whether any preprocessing flag was given (else the API's default, or the
    calibration file's recorded corrections on a restore)."""
    return bool(args.descan is not None or args.descan_degree is not None
                or args.dose_normalise or args.mask_pixels or args.detector_mask
                or args.no_auto_mask)


def parse_mask_pixels(values: list[str] | None) -> list[tuple[int, int]]:
    """``["3,4;10,12", "7,7"]`` -> ``[(3, 4), (10, 12), (7, 7)]``."""
    pixels: list[tuple[int, int]] = []
    for value in values or []:
        for item in value.split(";"):
            if not item.strip():
                continue
            m = _PIXEL.match(item)
            if m is None:
                raise UsageError(
                    f"--mask-pixels {value!r}: {item.strip()!r} is not ROW,COL (two "
                    "non-negative integers); e.g. --mask-pixels '12,40;3,7'")
            pixels.append((int(m.group(1)), int(m.group(2))))
    return pixels


def read_mask_file(path: str) -> np.ndarray:
    """The user's mask (True = use): a 2-D ``.npy`` of bools, or of 0 and 1."""
    flag = f"--detector-mask {path}"
    try:
        mask = np.load(Path(path).expanduser(), allow_pickle=False)
    except FileNotFoundError:
        raise UsageError(f"{flag}: no such file") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{flag} is not a NumPy .npy array ({exc}): save the mask with "
                         "numpy.save('mask.npy', mask)") from None
    if not isinstance(mask, np.ndarray) or mask.ndim != 2:
        shape = getattr(mask, "shape", None)
        raise UsageError(f"{flag}: need a 2-D array of the detector's shape, got shape {shape}")
    if mask.dtype != np.bool_:
        values = np.unique(mask) if mask.dtype.kind in "iuf" else None
        if values is None or not set(values.tolist()) <= {0, 1}:
            raise UsageError(f"{flag}: need bools or 0/1 (True = use the pixel), got dtype "
                             f"{mask.dtype}" + ("" if values is None else
                                                f" with values {values[:6].tolist()}"))
        mask = mask.astype(bool)
    return mask


@dataclass(frozen=True)
class MaskFlags:
    """``--detector-mask`` read and ``--mask-pixels`` parsed (once, before loading)."""

    mask: np.ndarray | None
    pixels: list[tuple[int, int]]


def check_options(args: argparse.Namespace) -> MaskFlags:
    """Flag combinations and values that cannot work, refused before loading; the mask
    flags as read, for ``preprocessing_from_args`` once the detector's shape is known."""
    if args.descan_degree is not None:
        if args.descan != "smooth":
            raise UsageError("--descan-degree applies to --descan smooth: add --descan smooth "
                             "(a plane is degree 1)")
        if not 1 <= args.descan_degree <= 5:
            raise UsageError(f"--descan-degree must be 1..5, got {args.descan_degree}")
    return MaskFlags(None if args.detector_mask is None else read_mask_file(args.detector_mask),
                     parse_mask_pixels(args.mask_pixels))


def preprocessing_from_args(args: argparse.Namespace, flags: MaskFlags,
                            detector_shape: tuple[int, int]) -> Preprocessing | None:
    """The flags as a ``Preprocessing`` for a detector of ``detector_shape`` (as loaded);
    None when no flag was given."""
    if not given(args):
        return None
    kr, kc = detector_shape
    mask = None if flags.mask is None else flags.mask.copy()  # the pixels go in below
    if mask is not None and mask.shape != (kr, kc):
        raise UsageError(
            f"--detector-mask {args.detector_mask} has shape {mask.shape}; the detector "
            f"as loaded is {(kr, kc)}{_as_loaded(args)}: save a mask of that shape")
    pixels = flags.pixels
    if pixels:
        outside = [p for p in pixels if not (p[0] < kr and p[1] < kc)]
        if outside:
            raise UsageError(
                f"--mask-pixels {outside[0][0]},{outside[0][1]} lies outside the {kr}x{kc} "
                f"detector{_as_loaded(args)}: rows 0..{kr - 1}, columns 0..{kc - 1}")
        mask = np.ones((kr, kc), dtype=bool) if mask is None else mask
        for r, c in pixels:
            mask[r, c] = False
    options: dict[str, Any] = {
        "descan": None if args.descan == "off" else (args.descan or "plane"),
        "dose_normalise": bool(args.dose_normalise), "detector_mask": mask,
        "find_bad_pixels": not args.no_auto_mask}
    if args.descan_degree is not None:
        options["smooth_degree"] = int(args.descan_degree)
    return Preprocessing(**options)


def _as_loaded(args: argparse.Namespace) -> str:
    done = [f for f, on in (("--bin-detector", args.bin_detector and args.bin_detector > 1),
                            ("--crop-to-bf", args.crop_to_bf)) if on]
    return f" (after {' and '.join(done)})" if done else ""

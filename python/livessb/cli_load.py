"""What the data commands of the command line share (``livessb fit``, ``livessb map``):
the data and calibration flags, loading a file with them (missing values named at once),
the folder rule for outputs before any work (atomic.require_folder), and the writers."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .atomic import atomic_write, folder_of, require_folder
from .cli_preprocess import add_preprocessing_arguments, check_options, preprocessing_from_args
from .cli_text import UsageError, cli_words, dataset_line, fit_lines, preprocessing_line

if TYPE_CHECKING:
    from collections.abc import Callable

    from .dataset import Dataset4D
    from .preprocess import Preprocessing
    from .session import Session

REQUIRED = ("voltage_kV", "semiangle_mrad", "scan_step_A")
EXAMPLES = {"voltage_kV": "200", "semiangle_mrad": "20", "scan_step_A": "0.6"}


def write_json(path: str | Path, doc: dict[str, Any]) -> Path:
    with atomic_write(path) as fh:
        fh.write(json.dumps(doc, indent=1, allow_nan=False, default=float).encode("utf-8"))
    return Path(path)


def write_png(path: Path, phase: Any) -> Path:
    from .render import phase_to_png

    with atomic_write(path) as fh:
        fh.write(phase_to_png(phase))
    return path


def add_calibration_arguments(f: argparse.ArgumentParser) -> None:
    """The calibration values a file may lack (``calibration_kwargs`` reads them back)."""
    f.add_argument("--voltage-kV", dest="voltage_kV", type=float, metavar="KV",
                   help="beam energy in kV, e.g. 200 (default: from the file)")
    f.add_argument("--semiangle-mrad", dest="semiangle_mrad", type=float, metavar="MRAD",
                   help="probe convergence semiangle in mrad, e.g. 20 (default: from the file)")
    f.add_argument("--scan-step-A", dest="scan_step_A", type=float, nargs="+", metavar="A",
                   help="scan step in Å (one value, or row and column), e.g. 0.6 "
                        "(default: from the file)")
    f.add_argument("--detector-sampling-mrad", dest="detector_sampling_mrad", type=float,
                   metavar="MRAD", help="mrad per detector pixel (default: from the file, "
                                        "else derived from the BF disk radius)")


def add_data_arguments(f: argparse.ArgumentParser) -> None:
    """The file's calibration, how to read it, the device and the preprocessing flags."""
    add_calibration_arguments(f)
    f.add_argument("--scan-shape", type=int, nargs=2, metavar=("ROWS", "COLS"),
                   help="scan shape of a 3D file (a stack of frames)")
    f.add_argument("--scan-region", type=int, nargs=4, metavar=("R0", "R1", "C0", "C1"),
                   help="load only these scan positions (stops exclusive)")
    f.add_argument("--bin-detector", type=int, metavar="N",
                   help="sum N×N detector pixels (less memory; sampling becomes N×)")
    f.add_argument("--crop-to-bf", action="store_true",
                   help="keep only the BF disk and a margin of the detector")
    f.add_argument("--detector-pixels", default="integrating",
                   choices=["integrating", "points"],
                   help="integrating (a camera: each pixel sums its area; the default) or "
                        "points (a simulator's output, read at each pixel's centre): "
                        "crystal mode models it")
    f.add_argument("--dataset-path", metavar="PATH",
                   help="HDF5 path (or NPZ member) of the counts")
    f.add_argument("--calibration", metavar="FILE",
                   help="restore this calibration file instead of fitting the full field "
                        "(its calibration values are used)")
    f.add_argument("--save-calibration", metavar="FILE", help="save the calibration JSON here")
    f.add_argument("--upsample", default="auto", metavar="N",
                   help="reconstruction upsampling: 'auto' (Nyquist of the aperture, capped "
                        "at 8) or an integer (default: auto)")
    f.add_argument("--trials", type=int, default=200, metavar="N",
                   help="search trials per fit (default: 200)")
    f.add_argument("--seed", type=int, default=42, metavar="N", help="search seed (default: 42)")
    f.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                   help="compute device (default: auto, the GPU when there is one)")
    f.add_argument("--scan-frequencies", default=None, choices=["grid", "effective"],
                   help="evaluate the overlaps at the frequency each spectrum bin's signal "
                        "has (effective, the default: removes the defocus bias of a crystal "
                        "whose lattice does not fit the scan window), or at the bin's grid "
                        "frequency (grid: the default before 2026-12-02); with "
                        "--calibration, the file's own by default")
    f.add_argument("--alias-pixels", default=None, choices=["kept", "excluded"],
                   help="on a scan coarser than the BF band (Nyquist below 2k_alpha): leave "
                        "out of each frequency's fit the BF pixels an alias also reaches "
                        "(excluded: removes the near-focus C10 bias of aliasing) or keep "
                        "them (kept, the default); with --calibration, the file's own by "
                        "default")
    f.add_argument("--scan-window", default=None, choices=["none", "hann", "auto"],
                   help="fit the spectra of the scan window as measured (none, the default) "
                        "or Hann-apodised (hann: removes the ~1%% C10 bias of a crystal "
                        "window of few lattice periods, errors about x2) or "
                        "auto (fits hann, reports the unapodised fit where the window check "
                        "sees no leakage and it has the smaller errors); with --calibration, "
                        "the file's own by default")
    f.add_argument("--object-model", default="per_bin", choices=["per_bin", "lattice"],
                   help="lattice: crystal mode, each fit refined on the lattice model of a "
                        "crystal's spectra (removes the C10 bias of small crystal windows; "
                        "the per-bin fit is kept, with the reason, where no lattice stands "
                        "out)")
    f.add_argument("--transpose", default=None, choices=["yes", "no"],
                   help="hold the detector transpose you know (yes: rows and columns "
                        "swapped against the scan) instead of estimating it from the COM "
                        "curl; for a new fit, not with --calibration")
    f.add_argument("--force", action="store_true",
                   help="accept implausible calibration values (unusual set-ups) and a "
                        "calibration file saved for other data")
    f.add_argument("--quiet", action="store_true",
                   help="print only errors and warnings (no progress bars, no summary)")
    add_preprocessing_arguments(f)


def check_data_args(args: argparse.Namespace) -> None:
    """Values argparse's types cannot refuse: --upsample, --trials, --transpose with
    --calibration."""
    if args.upsample != "auto" and not (args.upsample.isdigit() and int(args.upsample) >= 1):
        raise UsageError(f"--upsample must be 'auto' or a positive integer, got {args.upsample!r}")
    if args.trials < 1:
        raise UsageError(f"--trials must be at least 1, got {args.trials}")
    if args.transpose is not None and args.calibration is not None:
        raise UsageError("--transpose holds the transpose of a new fit; --calibration restores "
                         "the file's own: drop one of them")


def calibration_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    cal: dict[str, Any] = {}
    for key in ("voltage_kV", "semiangle_mrad", "detector_sampling_mrad"):
        if getattr(args, key) is not None:
            cal[key] = getattr(args, key)
    if args.scan_step_A is not None:
        if len(args.scan_step_A) > 2:
            raise UsageError("--scan-step-A takes one value (square pixels) or two (row, col), "
                             f"got {len(args.scan_step_A)}")
        cal["scan_step_A"] = args.scan_step_A[0] if len(args.scan_step_A) == 1 else tuple(
            args.scan_step_A)
    return cal


def from_calibration_file(path: str) -> dict[str, Any]:
    """The calibration values a saved calibration file recorded for its dataset."""
    try:
        doc = json.loads(Path(path).read_text())
        cal = dict(doc["dataset"]["calibration"])
    except FileNotFoundError:
        raise UsageError(f"--calibration {path}: no such file") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"--calibration {path} is not a livessb calibration file ({exc!r}): "
                         "use a file written by --save-calibration") from None
    if isinstance(cal.get("scan_step_A"), list):
        cal["scan_step_A"] = tuple(cal["scan_step_A"])
    return {k: v for k, v in cal.items() if v is not None}


def check_missing(args: argparse.Namespace, cal: dict[str, Any]) -> None:
    """Every required calibration value neither given nor in the file, listed at once."""
    from .io import read_metadata

    if not Path(args.path).exists():  # before asking for values a missing file cannot hold
        raise UsageError(f"no such file: {args.path!r}")
    missing = [k for k in REQUIRED if k not in cal]
    if not missing:
        return
    try:
        meta = read_metadata(args.path, dataset_path=args.dataset_path)
    except Exception:  # unreadable here: load() reports what is wrong with the file
        return
    missing = [k for k in missing if meta.get(k) is None]
    if missing:
        example = " ".join(f"{cli_words(k)} {EXAMPLES[k]}" for k in missing)
        raise UsageError(
            f"missing {', '.join(cli_words(k) for k in missing)}: {Path(args.path).name} does "
            f"not record {'it' if len(missing) == 1 else 'them'}; pass e.g. {example} "
            "(kV, mrad, Å)")


def check_outputs(outputs: Mapping[str, str | None]) -> None:
    """Every output's folder exists, before minutes of fitting (the folder rule: none is
    created); ``outputs``: flag -> the path given (None: not given)."""
    for flag, value in outputs.items():
        if value is not None:
            require_folder(folder_of(value), f"{flag} {value}")


def load_dataset(args: argparse.Namespace, outputs: Mapping[str, str | None],
                 ) -> tuple[Dataset4D, Preprocessing | None]:
    """The file with the calibration of the flags (else of --calibration's file, else of
    the file itself) and the preprocessing the flags ask for; every check that needs no
    data (missing values, output folders, preprocessing flags) before loading."""
    from .io import load
    from .plausible import unusual_values_allowed

    cal = calibration_kwargs(args)
    if args.calibration is not None:
        cal = {**from_calibration_file(args.calibration), **cal}
    check_missing(args, cal)
    check_outputs(outputs)
    mask_flags = check_options(args)  # preprocessing flags and the mask file, before loading
    with unusual_values_allowed(args.force):
        ds = load(args.path, scan_shape=tuple(args.scan_shape) if args.scan_shape else None,
                  scan_region=tuple(args.scan_region) if args.scan_region else None,
                  dataset_path=args.dataset_path, bin_detector=args.bin_detector,
                  crop_to_bf=args.crop_to_bf, progress=not args.quiet,
                  detector_pixels=args.detector_pixels, **cal)
    return ds, preprocessing_from_args(args, mask_flags, ds.detector_shape)


def open_session(args: argparse.Namespace, ds: Dataset4D, preprocessing: Preprocessing | None,
                 say: Callable[[str], object]) -> Session:
    """The session (restored from --calibration when given), its full-field fit done or
    restored, with the data, preprocessing and full-field lines said."""
    from .session import Session

    s = Session(ds, device=args.device, calibration=args.calibration, force=args.force,
                preprocessing=preprocessing, scan_frequencies=args.scan_frequencies,
                alias_pixels=args.alias_pixels, scan_window=args.scan_window)
    try:
        say(dataset_line(args.path, ds, s.device))
        say(preprocessing_line(s.preprocessing, s.diagnostics.spikes_repaired))
        if args.calibration is None:
            s.fit(trials=args.trials, seed=args.seed, progress=not args.quiet,
                  fit_detector_sampling=bool(getattr(args, "fit_detector_sampling", False)),
                  transpose=None if args.transpose is None else args.transpose == "yes",
                  object_model=args.object_model)
        assert s.full_fit is not None
        if (fitted := s.full_fit.provenance.get("detector_sampling")) is not None:
            say(f"detector sampling fitted: {fitted['mrad']:.5g} ± {fitted['error_mrad']:.2g} "
                f"mrad/px (start {fitted['start_mrad']:.5g})")
        say("\n".join(fit_lines("full field" + (" (restored)" if args.calibration else ""),
                                s.full_fit)))
    except BaseException:
        s.close()
        raise
    return s

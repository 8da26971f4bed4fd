"""What the command line prints: errors in its own words (flags, not Python keywords)
and a concise summary of a fit."""

from __future__ import annotations

import argparse
import difflib
import math
import re
from collections.abc import Mapping
from typing import Any

from .params import BY_NAME
from .physics.lattice import lattice_periods_A


class UsageError(ValueError):
    """Command-line input that cannot work; the message names the flags to fix."""

# Python keyword -> command-line flag, for messages written for the Python API.
FLAGS: dict[str, str] = {
    "voltage_kV": "--voltage-kV", "semiangle_mrad": "--semiangle-mrad",
    "scan_step_A": "--scan-step-A", "detector_sampling_mrad": "--detector-sampling-mrad",
    "scan_shape": "--scan-shape", "scan_region": "--scan-region",
    "bin_detector": "--bin-detector", "upsample": "--upsample", "dataset_path": "--dataset-path",
    "detector_mask": "--detector-mask", "smooth_degree": "--descan-degree",
    "dose_normalise": "--dose-normalise",
}
_PHRASES: tuple[tuple[str, str], ...] = (
    # the plausibility override, and the API spellings of options the CLI has as flags
    (r"pass allow_unusual=True \(Dataset4D\), or load inside "
     r"`with livessb\.unusual_values_allowed\(\):`", "pass --force"),
    (r"allow_unusual=True", "--force"),
    (r"livessb\.load\(\.\.\., crop_to_bf=True\)", "--crop-to-bf"),
    (r"livessb\.load\(\.\.\., (\w+)=([^)]*\)?)\)", r"\1=\2"),
    (r"scan_shape=\(rows, cols\)", "scan_shape=ROWS COLS"),
    (r"(\w+)=\((\d+), (\d+), (\d+), (\d+)\)", r"\1=\2 \3 \4 \5"),
    (r"device='(\w+)'", r"--device \1"),
    (r"force=True", "--force"),
    (r"Session\(ds, calibration=path\)", "--calibration FILE"),
    # map grids (fit.maps.tile_grid): the flags of livessb map
    (r"use tiles of at most \((\d+), (\d+)\) positions \(or fit\(\) for the full field\)",
     r"use --tile \1 \2 or smaller (or livessb fit for the full field)"),
    (r"\b(tile|step) \((\d+), (\d+)\)", r"--\1 \2 \3"),
    (r"\(or step=None\)", "(or leave --step out)"),
)


def cli_words(message: str) -> str:
    """Rewrite an API error message in the command line's terms."""
    for pattern, repl in _PHRASES:
        message = re.sub(pattern, repl, message)
    for key, flag in FLAGS.items():
        # "scan_step_A=0.6" -> "--scan-step-A 0.6"; a bare "voltage_kV" -> "--voltage-kV"
        message = re.sub(rf"(?<![\w-]){re.escape(key)}(\[\w+\])?=(?=\S)", flag + " ", message)
        message = re.sub(rf"(?<![\w-]){re.escape(key)}(\[\w+\])?(?!\w)", flag, message)
    return message


def _value(name: str, value: float, error: float | None) -> str:
    p = BY_NAME.get(name)
    unit, digits = (p.unit, p.digits) if p is not None else ("", 3)
    digits = max(digits, 2)
    text = f"{value:>10.{digits}f}"  # right-aligned: the decimal points line up
    if error is not None and math.isfinite(error):
        text += f" ± {error:.{digits}f}"
    return f"{text} {unit}".rstrip()


def crystal_mode_text(record: Mapping[str, Any]) -> str:
    """What crystal mode (object_model="lattice") did: the lattice and how far the fit
    moved from the per-bin one, or why the per-bin fit was kept ("" for a per-bin fit);
    the CLI's line and the widget's region panel."""
    if not record:
        return ""
    if record.get("model") != "lattice":
        return str(record.get("reason", "per-bin fit kept"))
    basis = record["basis_inv_A"]
    periods = ", ".join(f"{a:.4g}" for a in lattice_periods_A(basis))
    c10 = record["per_bin"]["params"].get("C10")
    moved = f"; the per-bin fit's C10 was {c10:.2f} Å" if c10 is not None else ""
    thin = record.get("thin_object") or {}
    first = (record.get("first_order") or {}).get("C10")
    if not thin:  # a record saved before the thin object's stage
        terms = ""
    elif "reason" not in thin:  # the thin object's terms seen and fitted
        terms = (f", thin object's every term (first order: C10 {first:.2f} Å)"
                 if first is not None else "")
    elif "statistic" in thin:
        terms = (f", first order (second-order terms not seen: χ²₁ {thin['statistic']:.1f} "
                 f"< {thin['threshold']:g})")
    else:
        terms = ", first order (thick model kept)"
    choice = record.get("model_choice") or {}  # thin or thick asked again (fit.lattice_choice)
    if choice.get("kept") == "thin":
        held = choice["thick_params"]
        terms = (f", read thin (the per-bin fit's depth {held['depth']:.3g} Å, tilt "
                 f"({held['tilt_row_mrad']:.3g}, {held['tilt_col_mrad']:.3g}) mrad do not "
                 f"improve the model of the pixels' area: T {choice['statistic']:.1f} ≤ "
                 f"{choice['threshold']:g}){terms}")
    samples = int(record.get("pixel_samples", 1))
    pixels = (f", pixels integrated over {samples}x{samples} samples (simulated counts: "
              "detector_pixels=\"points\")" if samples > 1 else "")
    return (f"lattice model, periods {periods} Å, {record['points']} points, "
            f"contrast {record['contrast']:.1f}x{terms}{pixels}{moved}")


def crystal_mode_lines(record: Mapping[str, Any]) -> list[str]:
    text = crystal_mode_text(record)
    return [f"  crystal mode: {text}"] if text else []


def fit_lines(title: str, fit: Any) -> list[str]:
    """A few lines: loss, rotation, the model kept and why, each parameter (± its error
    when the fit has them; "not determined" where the data do not determine it, and why
    where the thick model was kept yet its depth is not one), and the parameters that ended
    on the search box's edge."""
    errors: Mapping[str, float] = getattr(fit, "errors", None) or {}
    trials = len(getattr(fit, "trials", []) or [])
    total = (getattr(fit, "timings", {}) or {}).get("total_s")
    head = f"{title}: loss {fit.loss:.6g}, rotation {fit.rotation_deg:.3f}°"
    head += " (transposed)" if fit.transpose else ""
    if trials:
        head += f", {trials} trials"
    if total is not None:
        head += f", {total:.1f} s"
    lines = [head]
    provenance = getattr(fit, "provenance", None) or {}
    choice = provenance.get("model_choice")
    # crystal mode's own choice where it made one again (fit.lattice_choice)
    choice = (getattr(fit, "lattice", None) or {}).get("model_choice") or choice
    if isinstance(choice, Mapping) and choice.get("kept"):
        reason = choice.get("reason")
        lines.append(f"  model: {choice['kept']}" + (f" ({reason})" if reason else ""))
    settings = non_default_settings(provenance)
    if settings:
        lines.append(f"  settings: {settings}")
    lines += crystal_mode_lines(getattr(fit, "lattice", None) or {})
    check = provenance.get("window_check")  # a "hann" fit against the unapodised one
    if isinstance(check, Mapping) and check.get("advice"):
        lines.append(f"  window check: {check['advice']}")
    undetermined = set(getattr(fit, "undetermined", None) or ())
    width = max((len(n) for n in fit.params), default=0)
    for name, value in fit.params.items():
        err = errors.get(name) if isinstance(errors, Mapping) else None
        shown = "not determined" if name in undetermined else _value(name, value, err)
        lines.append(f"  {name:<{width}}  {shown}")
    from .fit.periods_advice import advice_of  # here: the CLI's start stays light
    from .fit.systematic import why_not_determined

    # e.g. kept thick, yet no depth; or a detector orientation the losses cannot tell
    lines += [f"  why: {w}" for w in why_not_determined(provenance.get("warnings", []))]
    lines += [f"  advice: {w}" for w in advice_of(provenance.get("warnings", []))]
    for name in fit.on_box_edge or []:
        lines.append(f"  warning: {name} ended on the edge of the search box: the optimum may "
                     "lie outside it (check the calibration, or widen the box in Python)")
    return lines


def non_default_settings(provenance: Mapping[str, Any]) -> str:
    """The fit's model settings that are not the defaults, and what they change ("" for
    none): a reader of the summary sees why its errors are larger or its pairs fewer."""
    out = []
    window = provenance.get("scan_window", "none")
    if window != "none":
        design = (provenance.get("noise") or {}).get("design")
        reported = (provenance.get("window_check") or {}).get("reported")
        notes = ([f"reported {reported}"] if window == "auto" and reported else []) + (
            [f"errors ×{float(design) ** 0.5:.2f}"] if design else [])
        out.append(f"scan window {window}" + (f" ({', '.join(notes)})" if notes else ""))
    if provenance.get("alias_pixels", "kept") != "kept":
        out.append(f"alias pixels {provenance['alias_pixels']}")
    if provenance.get("scan_frequencies", "effective") != "effective":
        out.append(f"scan frequencies {provenance['scan_frequencies']}")
    return ", ".join(out)


def dataset_line(path: str, ds: Any, device: str) -> str:
    rows, cols = ds.scan_shape
    kr, kc = ds.detector_shape
    step = ds.scan_step_A
    step_text = f"{step[0]:g} Å" if step[0] == step[1] else f"{step[0]:g} × {step[1]:g} Å"
    return (f"{path}: {rows}×{cols} scan, {kr}×{kc} detector ({ds.counts.dtype}); "
            f"{ds.voltage_kV:g} kV, {ds.semiangle_mrad:g} mrad, step {step_text}, "
            f"{ds.detector_sampling_mrad:.4g} mrad/px; device {device}")


def preprocessing_line(corrections: Any, spikes: int = 0) -> str:
    """What was corrected before the spectra: descan, bad pixels, one-frame spikes, dose
    normalisation."""
    d = corrections.to_dict()
    opts, fit = d["options"], corrections.descan
    if opts["descan"] is None:
        descan = "descan off"
    elif fit is None:
        descan = f"descan {opts['descan']}: not measured (too few scan positions)"
    else:
        model = opts["descan"] + (f" (degree {fit.degree})" if opts["descan"] == "smooth"
                                  else "")
        descan = (f"descan {model}: span {fit.span_px:.3g} px, "
                  + ("applied" if d["descan_applied"] else "too small, not applied"))
    n, found = len(d["bad_pixels"]), d["found_pixels"]
    auto = f"{found} found automatically" if opts["find_bad_pixels"] else "search off"
    pixels = f"{n} bad detector pixel{'' if n == 1 else 's'} repaired ({auto})"
    dose = "dose normalised" if opts["dose_normalise"] else "dose normalisation off"
    spiked = f"{spikes} one-frame spike{'' if spikes == 1 else 's'} replaced"
    return f"preprocessing: {descan}; {pixels}; {spiked}; {dose}"


def unknown_options_hint(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """``extras`` (what ``parser``, a subcommand's, did not recognise), each mistyped flag
    followed by the flag it most likely meant: the case (``--voltage-kv``) or a letter or
    two off; a flag of the subcommand given before its name, with where it goes."""
    flags = [s for action in parser._actions for s in action.option_strings]
    words = []
    for extra in extras:
        name = extra.split("=", 1)[0]
        if name in flags:  # given before the command name, where the top level reads it
            extra = f"{extra} (it goes after the command: {parser.prog} ... {name})"
        elif name.startswith("--"):
            same_case = [f for f in flags if f.lower() == name.lower()]
            near = same_case or difflib.get_close_matches(name, flags, n=1, cutoff=0.75)
            if near:
                extra = f"{extra} (did you mean {near[0]}?)"
        words.append(extra)
    return " ".join(words)

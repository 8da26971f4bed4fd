"""The series' choices, checked before any cluster starts: the reference scan, what is
held fixed, the warm-start mode, and the settings keys that decide which results a rerun
may keep."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .._version import __version__
from ..dataset import Dataset4D
from ..fit.fixed import check_fixed
from ..params import JOINT
from .sources import ScanSource, SeriesError, missing_path_message, settings_key
from .warm import FitPlan

WARM_MODES = {True: "reference", "reference": "reference", "previous": "previous",
              False: "off", "off": "off"}

Fixed = dict[str, float] | tuple[str, ...]


def warm_mode(warm_start: bool | str) -> str:
    try:
        return WARM_MODES[warm_start]
    except (KeyError, TypeError):
        raise SeriesError(f"warm_start must be True (from the reference), 'previous' (from "
                          f"the previous scan) or False, got {warm_start!r}") from None


def fixed_spec(fixed: Mapping[str, float] | Sequence[str] | str | None) -> Fixed:
    """Held values (a mapping: held everywhere, the reference too) or names (held in every
    scan at the reference's fitted values), checked against the fit parameters."""
    if fixed is None:
        return ()
    if isinstance(fixed, Mapping):
        return check_fixed(fixed, JOINT)
    names = tuple(n.strip() for n in (fixed.split(",") if isinstance(fixed, str) else fixed)
                  if n.strip())
    check_fixed(dict.fromkeys(names, 0.0), JOINT)  # names known, not everything held
    return names


def choose_reference(reference: int | str | Path | Dataset4D | None, scans: list[ScanSource],
                     missing: list[dict[str, Any]]) -> tuple[list[ScanSource], bool]:
    """The reference candidates in order (a default reference: every scan, first first,
    the next tried when one fails) and whether it was chosen by the caller."""
    if reference is None:
        return list(scans), False
    if isinstance(reference, Dataset4D):
        return [ScanSource(-1, "dataset", dataset=reference)], True
    if isinstance(reference, int) and not isinstance(reference, bool):
        for scan in scans:
            if scan.index == reference:
                return [scan], True
        gone = [m["error"] for m in missing if m["index"] == reference]
        n = len(scans) + len(missing)
        raise SeriesError(f"reference index {reference} is not a usable scan of this series "
                          f"of {n}" + (f" ({gone[0]})" if gone else "")
                          + ": give an index of an existing scan or a path")
    if isinstance(reference, (str, Path)):
        text = str(reference)
        if text.lstrip("-").isdigit():
            return choose_reference(int(text), scans, missing)
        p = Path(text).expanduser()
        if not p.is_file():
            raise SeriesError(f"reference {missing_path_message(text)}")
        resolved = str(p.resolve())
        for scan in scans:
            if scan.path == resolved:
                return [scan], True
        return [ScanSource(-1, p.name, path=resolved)], True
    raise SeriesError(f"reference must be a scan index, a path or a Dataset4D, got "
                      f"{type(reference).__name__}")


def base_settings(plan: FitPlan, fixed: Fixed) -> dict[str, Any]:
    """What decides the reference's fit besides its data."""
    return {"livessb": __version__, **asdict(plan),
            "fixed_values": dict(fixed) if isinstance(fixed, dict) else {}}


def scan_keys(plan: FitPlan, fixed: Fixed, mode: str, reference: ScanSource,
              scans: list[ScanSource]) -> tuple[str, dict[int, str]]:
    """The reference's settings key and every scan's (a chained scan's includes the
    scans before it in its chain: their fits are its start)."""
    base = base_settings(plan, fixed)
    ref_key = settings_key({**base, "role": "reference"})
    common = {**base, "role": "scan", "mode": mode, "fixed": fixed,
              "reference": reference.identity(), "reference_key": ref_key}
    keys: dict[int, str] = {}
    for before in chains(reference, scans, mode):
        chain: list[dict[str, Any]] = []
        for scan in before:
            keys[scan.index] = settings_key({**common, "chain": list(chain)})
            if mode == "previous":
                chain.append(scan.identity())
    return ref_key, keys


def chains(reference: ScanSource, scans: list[ScanSource], mode: str) -> list[list[ScanSource]]:
    """The scans other than the reference in the order they are started from: outward
    from the reference (after it ascending, before it descending) when chained."""
    others = [s for s in scans if s.index != reference.index]
    if mode != "previous":
        return [others]
    after = [s for s in others if s.index > reference.index]
    before = [s for s in others if s.index < reference.index][::-1]
    return [c for c in (after, before) if c]

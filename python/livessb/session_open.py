"""Opening a session on a scan: what is checked and computed before an engine holds the
counts, and what a calibration restores after. Shared by ``Session(...)`` and
``Session.load_scan`` (the next scan of a series on the same resident session), so both
refuse the same bad input with the same words, before anything already held is touched."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .calibration import CalibrationError, load_calibration
from .dataset import Dataset4D
from .detector_sampling import restored as restored_sampling
from .engine import Engine, make_engine
from .maps import MapResult
from .memory import CorrectedCountsCheck, check_session_memory
from .physics.aliases import alias_pixels_for, check_alias_pixels
from .physics.apodisation import scan_window_for, spectra_sets
from .physics.frequencies import check_scan_frequencies, scan_frequencies_for
from .preprocess import Corrections, Preprocessing, preprocess_for
from .results import FitResult, RegionResult

if TYPE_CHECKING:
    from .session import Session


@dataclass(frozen=True)
class OpenedScan:
    """A scan checked and preprocessed, ready for an engine."""

    dataset: Dataset4D  # at the calibration's fitted detector sampling, where it has one
    doc: dict[str, Any] | None  # the calibration document, checked against the dataset
    scan_frequencies: str
    preprocessing: Corrections
    alias_pixels: str = "kept"
    scan_window: str = "none"

    @property
    def engine_options(self) -> dict[str, str]:
        """The engine's model settings (``make_engine``'s options)."""
        return {"scan_frequencies": self.scan_frequencies, "alias_pixels": self.alias_pixels,
                "scan_window": self.scan_window}

    @property
    def engine_dataset(self) -> Dataset4D:
        """What the engine holds: the counts with the preprocessing's corrections."""
        return self.preprocessing.dataset_for_engine(self.dataset)

    def engine(self, device: str, staging_budget_MiB: float) -> Engine:
        """A new engine on this scan with its model settings."""
        return make_engine(self.engine_dataset, device, staging_budget_MiB=staging_budget_MiB,
                           **self.engine_options)


def open_scan(
    dataset: Any, device: str, calibration: str | Path | None, force: bool,
    staging_budget_MiB: float, preprocessing: Preprocessing | None,
    scan_frequencies: str | None, reusable_bytes: int = 0, alias_pixels: str | None = None,
    scan_window: str | None = None,
) -> OpenedScan:
    """Check ``dataset`` (type, memory, the calibration's match) and run its
    preprocessing pass; raises before any engine memory is taken. ``reusable_bytes``:
    what the engine of the scan it replaces holds (``Session.load_scan``), free for it."""
    if not isinstance(dataset, Dataset4D):
        raise TypeError(
            f"Session needs a livessb.Dataset4D, got {type(dataset).__name__}: wrap the "
            "counts with livessb.Dataset4D(counts, voltage_kV=..., semiangle_mrad=..., "
            "scan_step_A=...) or use livessb.load(path)")
    check_scan_frequencies(scan_frequencies or "effective")  # a typo: before any pass
    check_alias_pixels(alias_pixels or "kept")
    sets = spectra_sets(scan_window or "none")
    check_session_memory(dataset, device, staging_budget_MiB,  # refuse before allocating
                         reusable_bytes=reusable_bytes, spectra_sets=sets)
    doc = None if calibration is None else load_calibration(calibration, dataset, force)
    window = scan_window_for(scan_window, doc)
    dataset = restored_sampling(dataset, doc)  # a fitted sampling
    check_corrected = CorrectedCountsCheck(dataset, device, staging_budget_MiB, reusable_bytes,
                                           spectra_sets(window))
    corrections = preprocess_for(dataset, preprocessing, doc, before_pass=check_corrected)
    check_corrected(corrections.active)  # a descan found in the pass, too
    return OpenedScan(dataset, doc, scan_frequencies_for(scan_frequencies, doc), corrections,
                      alias_pixels_for(alias_pixels, doc), window)


def restore_results(session: Session, path: str | Path, doc: dict[str, Any]) -> None:
    """The calibration's rotation, full fit, regions (their crops reconstructed) and maps
    onto ``session``."""
    try:
        rotation_deg = float(doc["rotation_deg"])
        transpose = bool(doc["transpose"])
        full_fit = FitResult.from_dict(doc["full_fit"]) if doc["full_fit"] else None
        fits = [(r["id"], FitResult.from_dict(r["fit"])) for r in doc["regions"]]
        maps = [MapResult.from_dict(m) for m in doc.get("maps", [])]  # older files: none
    except (KeyError, TypeError, ValueError) as exc:
        raise CalibrationError(f"calibration file {path} is corrupt: {exc!r}") from None
    session.rotation_deg, session.transpose, session.full_fit = rotation_deg, transpose, full_fit
    for rid, fit in fits:
        b = session.check_bounds(fit.bounds)
        crop = session.reconstruct(fit.params, crop=b)
        session.regions[rid] = RegionResult(id=rid, bounds=b, fit=fit, crop=crop)
    for m in maps:
        for b in m.tile_bounds():
            session.check_bounds(b)
        m.attach(session)
        session.maps.append(m)

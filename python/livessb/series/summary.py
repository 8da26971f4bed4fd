"""What the series keeps besides each scan's own files: the compact records (no trial
lists), the drift-corrected average (``out/average.emd`` + its record) and the summary
``out/series.json``."""

from __future__ import annotations

from dataclasses import asdict, is_dataclass
from datetime import datetime
from typing import Any

import numpy as np

from ..export_hdf5 import save_reconstruction_emd
from ..results import Reconstruction
from .average import drift_corrected_average, read_phase
from .store import SeriesStore
from .warm import FitPlan

SUMMARY_SCHEMA = "livessb.series"


def compact(record: dict[str, Any]) -> dict[str, Any]:
    """A scan record without its full fit record (trials, Newton steps: in its own file)."""
    return {k: v for k, v in record.items() if k != "fit"}


def average_scans(store: SeriesStore, records: list[dict[str, Any]],
                  reference: dict[str, Any] | None, plan: FitPlan) -> dict[str, Any]:
    """Register and average the finished scans' phases; the average written as EMD."""
    done = [r for r in records if r.get("status") == "done"]
    if len(done) < 2:
        return {"status": "not enough scans", "n": len(done)}
    images, sampling = [], (1.0, 1.0)
    for r in done:
        phase, sampling = read_phase(store.scans / r["outputs"]["reconstruction"])
        images.append(phase)
    at = next((i for i, r in enumerate(done) if reference is not None
               and r["index"] == reference["index"]), 0)
    try:
        avg = drift_corrected_average(images, reference=at)
    except ValueError as exc:  # different shapes, no overlap: said, nothing lost
        return {"status": "failed", "error": str(exc)}
    mean = {k: float(np.mean([r["params"][k] for r in done])) for k in done[0]["params"]}
    rec = Reconstruction(object=np.exp(1j * avg.phase.astype(np.float64)).astype(np.complex64),
                         params=mean, upsample=int(done[0]["upsample"]), sampling_A=sampling)
    path = save_reconstruction_emd(rec, store.root / "average.emd")
    return {"status": "done", "scans": [r["index"] for r in done], "file": path.name,
            **avg.to_dict(sampling)}


def summary_document(
    status: str, records: list[dict[str, Any]], reference: dict[str, Any] | None,
    kept: list[int], average: dict[str, Any] | None, cluster: str, settings: dict[str, Any],
    wall_s: float, now: datetime,
) -> dict[str, Any]:
    done = [r for r in records if r.get("status") == "done"]
    fitted = [r for r in done if r["index"] not in kept]
    return {
        "schema": SUMMARY_SCHEMA, "schema_version": 1, "status": status,
        "written": now.isoformat(timespec="seconds"), "cluster": cluster,
        "settings": {k: asdict(v) if is_dataclass(v) and not isinstance(v, type) else v
                     for k, v in settings.items()},
        "reference": None if reference is None else {
            "index": reference["index"], "label": reference["label"],
            "params": reference.get("params"), "rotation_deg": reference.get("rotation_deg")},
        "counts": {"scans": len(records), "done": len(done), "kept": len(kept),
                   "failed": len(records) - len(done)},
        "wall_s": wall_s,
        "scans_per_s": len(fitted) / wall_s if fitted and wall_s > 0 else None,
        "scans": [compact(r) for r in records], "average": average,
    }

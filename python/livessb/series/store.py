"""The series' output folder: one reconstruction (EMD) and one JSON record per scan,
each written atomically as the scan finishes, the JSON last (a record that says "done"
means its reconstruction is complete); a rerun skips the scans whose record matches."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._version import __version__
from ..atomic import atomic_write_text
from ..export_hdf5 import save_reconstruction_emd
from .sources import ScanSource
from .warm import ScanFit

SCHEMA = "livessb.series.scan"
SUMMARY = "series.json"


class SeriesStore:
    """``out/scans/<index>-<name>.{emd,json}`` (+ the reference's calibration) and
    ``out/series.json`` (the summary, rewritten as scans finish)."""

    def __init__(self, out: str | Path) -> None:
        self.root = Path(out).expanduser().resolve()
        self.scans = self.root / "scans"
        self.scans.mkdir(parents=True, exist_ok=True)

    def record_path(self, scan: ScanSource) -> Path:
        return self.scans / f"{scan.stem}.json"

    def emd_path(self, scan: ScanSource) -> Path:
        return self.scans / f"{scan.stem}.emd"

    def calibration_path(self, scan: ScanSource) -> Path:
        return self.scans / f"{scan.stem}.calibration.json"

    def finished(self, scan: ScanSource, key: str) -> dict[str, Any] | None:
        """The scan's record when it finished with these settings on this data, else None
        (no record, a failed one, other settings, a changed file, a missing output)."""
        try:
            record = json.loads(self.record_path(scan).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(record, dict) or record.get("status") != "done":
            return None
        if record.get("settings_key") != key or record.get("source") != scan.identity():
            return None
        if not (self.scans / str(record.get("outputs", {}).get("reconstruction"))).is_file():
            return None
        return record

    def write_done(self, scan: ScanSource, key: str, result: ScanFit, role: str,
                   timings: dict[str, float], where: dict[str, Any]) -> dict[str, Any]:
        t0 = time.perf_counter()
        emd = save_reconstruction_emd(result.reconstruction, self.emd_path(scan))
        fit = result.fit
        outputs = {"reconstruction": emd.name}
        if role == "reference":
            outputs["calibration"] = self.calibration_path(scan).name
        record = {
            **self._head(scan, key, "done", role), "mode": result.mode,
            "params": fit.params, "errors": fit.errors, "loss": fit.loss,
            "rotation_deg": fit.rotation_deg, "transpose": fit.transpose,
            "undetermined": fit.undetermined, "on_box_edge": fit.on_box_edge,
            "reused": result.reused, "upsample": result.reconstruction.upsample,
            "phase_sha256": result.reconstruction.phase_hash(), "outputs": outputs,
            **where, "timings": {**timings, **result.timings}, "fit": fit.to_dict(),
        }
        times = record["timings"]
        times["write_s"] = time.perf_counter() - t0
        times["total_s"] = sum(times[k] for k in ("load_s", "open_s", "fit_s",
                                                  "reconstruct_s", "write_s") if k in times)
        self._write(scan, record)
        return record

    def write_failed(self, scan: ScanSource, key: str, status: str, error: str, role: str,
                     where: dict[str, Any]) -> dict[str, Any]:
        record = {**self._head(scan, key, status, role), "error": error, **where}
        self._write(scan, record)
        return record

    def _head(self, scan: ScanSource, key: str, status: str, role: str) -> dict[str, Any]:
        return {"schema": SCHEMA, "schema_version": 1, "livessb": __version__,
                "index": scan.index, "label": scan.label, "role": role, "status": status,
                "source": scan.identity(), "settings_key": key,
                "written": datetime.now(UTC).isoformat(timespec="seconds")}

    def _write(self, scan: ScanSource, record: dict[str, Any]) -> None:
        atomic_write_text(self.record_path(scan),
                          json.dumps(record, indent=1, allow_nan=False, default=float))

    def write_summary(self, summary: dict[str, Any]) -> Path:
        return atomic_write_text(self.root / SUMMARY,
                                 json.dumps(summary, indent=1, allow_nan=False, default=float))

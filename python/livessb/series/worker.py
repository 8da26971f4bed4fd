"""What runs on a Dask worker: the resident per-worker state (a worker plugin) and the
one task per scan, which loads the scan itself (only a path travels), fits it, writes its
reconstruction and record atomically and returns the small record.

What stays resident across a worker's scans: one open ``Session``
(``series.resident.ResidentSession``: engine, device memory pool, cuFFT plans and the
counts buffer, each next scan loaded into it with ``Session.load_scan``), the compiled
kernels and the reference calibration, read once. A scan's result is the same bits as a
serial loop over new ``Session`` objects gives (``tests/test_series.py``).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distributed import WorkerPlugin, get_worker

from ..dataset import Dataset4D
from .resident import ResidentSession, SessionOpener, new_session
from .sources import ScanSource
from .store import SeriesStore
from .warm import FitPlan, ScanFit, fit_from, fit_reference, geometry_mismatch

PLUGIN_NAME = "livessb-series"


class SeriesWorker(WorkerPlugin):
    """Per-worker state kept between scans: the resident session (on a worker only;
    elsewhere each scan's session is its own), calibrations read, scans done, and the
    first scan's time (which pays the process's set-up: kernel compilation, device
    context) against the later ones'."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self.address = ""
        self.calibrations: dict[str, dict[str, Any]] = {}
        self.scans_done = 0
        self.first_scan_s: float | None = None
        self.resident: ResidentSession | None = None

    def setup(self, worker: Any) -> None:
        self.address = str(worker.address)
        self.resident = ResidentSession()

    def teardown(self, worker: Any) -> None:
        if self.resident is not None:
            self.resident.close()

    def sessions(self) -> SessionOpener:
        return new_session if self.resident is None else self.resident

    def session_note(self) -> dict[str, Any]:
        """The record's word on the session a scan ran on."""
        r = self.resident
        if r is None or r.scans == 0:
            return {"session": "own"}
        return {"session": "resident", "session_scan": r.scans, "sessions_opened": r.opened}

    def calibration(self, path: str) -> dict[str, Any]:
        if path not in self.calibrations:
            self.calibrations[path] = json.loads(Path(path).read_text(encoding="utf-8"))
        return self.calibrations[path]

    def done(self, seconds: float) -> None:
        self.scans_done += 1
        if self.first_scan_s is None:
            self.first_scan_s = seconds


def resident() -> SeriesWorker:
    """This worker's state (a fresh one outside a worker or before registration)."""
    try:
        plugin = get_worker().plugins.get(PLUGIN_NAME)
    except ValueError:  # not on a worker: the in-process path of the tests
        plugin = None
    return plugin if isinstance(plugin, SeriesWorker) else SeriesWorker()


@dataclass(frozen=True)
class ScanJob:
    """Everything a worker needs for one scan (small: a path, not the counts)."""

    scan: ScanSource
    role: str  # "reference" | "scan"
    out: str
    key: str  # settings key (store.finished compares it on a rerun)
    plan: FitPlan
    held: dict[str, float] = field(default_factory=dict)  # reference: the user's values
    calibration: str | None = None  # the reference's calibration file (scans)
    warm: bool = True
    start: dict[str, float] | None = None
    start_from: str = ""
    chained: bool = False  # warm_start="previous": start from the previous record


def load_scan(scan: ScanSource, plan: FitPlan) -> Dataset4D:
    if scan.dataset is not None:
        return scan.dataset
    from ..io import load

    assert scan.path is not None
    return load(scan.path, progress=False, **plan.load_options)


def run_scan(job: ScanJob, previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """Fit one scan and write its result; failures become a record, never an exception
    (a corrupt scan is reported and the series goes on)."""
    state = resident()
    store = SeriesStore(job.out)
    where = {"worker": state.address or "in-process", "pid": os.getpid()}
    start, start_from = _chain_start(job, previous)
    chain = {"chain": {"start": start, "from": start_from}} if job.chained else {}
    t0 = time.perf_counter()
    try:
        ds = load_scan(job.scan, job.plan)
        t_load = time.perf_counter()
        if job.role == "reference":
            result: ScanFit = fit_reference(ds, job.plan, job.held,
                                            store.calibration_path(job.scan), state.sessions())
        else:
            assert job.calibration is not None
            why = geometry_mismatch(ds, state.calibration(job.calibration)["dataset"])
            if why is not None:
                return store.write_failed(job.scan, job.key, "mismatched", why, job.role,
                                          {**where, **chain})
            if start is None:
                return store.write_failed(job.scan, job.key, "failed", "no start: every "
                                          "earlier scan of the chain failed", job.role, where)
            result = fit_from(ds, job.plan, Path(job.calibration), start, job.held,
                              start_from, warm=job.warm, sessions=state.sessions())
    except Exception as exc:  # corrupt, unreadable or unfittable: reported, skipped
        return store.write_failed(job.scan, job.key, "failed",
                                  f"{type(exc).__name__}: {exc}", job.role, {**where, **chain})
    if job.chained:
        chain["chain"] = {"start": result.fit.params, "from": f"scan {job.scan.index}"}
    record = store.write_done(job.scan, job.key, result, job.role,
                              {"load_s": t_load - t0}, {**where, "device": ds_device(result),
                                                        **state.session_note(), **chain})
    state.done(record["timings"]["total_s"])
    return record


def ds_device(result: ScanFit) -> str:
    return str(result.fit.provenance.get("device", "?"))


def _chain_start(job: ScanJob, previous: dict[str, Any] | None) -> tuple[
        dict[str, float] | None, str]:
    """The start parameters: the job's own, or (chained) the previous record's fit, or
    what that record itself started from when it failed."""
    if not job.chained or previous is None:
        return job.start, job.start_from
    if previous.get("status") == "done":
        return dict(previous["params"]), f"scan {previous['index']}"
    chain = previous.get("chain") or {}
    return chain.get("start"), str(chain.get("from", ""))

"""``fit_series``: a series of scans fitted on a Dask cluster, warm-started from a
reference, each result written as it finishes, optionally drift-averaged.

The client only plans and collects: each scan travels to a worker as a path (or, for an
in-memory dataset, that dataset alone), the worker loads, fits and writes it
(``series.worker``), and only its small JSON record comes back. A worker that dies
mid-scan leaves its scan to the scheduler, which runs it again on another worker
(Dask's own rescheduling); a scan that fails is recorded and the others go on.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..dataset import Dataset4D
from .choices import Fixed, chains, choose_reference, fixed_spec, scan_keys, warm_mode
from .cluster import ClusterHandle, connect
from .progress import SeriesProgress
from .sources import ScanSource, SeriesError, resolve_sources
from .store import SeriesStore
from .summary import average_scans, compact, summary_document
from .warm import FitPlan, held_values
from .worker import ScanJob, run_scan

Source = str | Path | Dataset4D
ProgressArg = bool | Callable[[dict[str, Any], int, int], None]


@dataclass
class SeriesResult:
    """Every scan's record in series order (``status``: done, failed, mismatched,
    missing), the reference's index, the scans a rerun kept, and the average."""

    records: list[dict[str, Any]]
    reference: int
    out: Path
    kept: list[int] = field(default_factory=list)
    average: dict[str, Any] | None = None
    cluster: str = ""

    @property
    def done(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("status") == "done"]

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("status") != "done"]

    def values(self, name: str) -> np.ndarray:
        """A fitted parameter over the series (NaN where a scan did not finish)."""
        return np.array([r["params"][name] if r.get("status") == "done" else math.nan
                         for r in self.records])

    def errors(self, name: str) -> np.ndarray:
        return np.array([r["errors"].get(name, math.nan) if r.get("status") == "done"
                         else math.nan for r in self.records])


def fit_series(
    sources: Sequence[Source] | Source, client: Any = None,
    reference: int | str | Path | Dataset4D | None = None,
    fixed: Mapping[str, float] | Sequence[str] | str | None = None,
    warm_start: bool | str = True, out: str | Path | None = None, *,
    average: bool = False, trials: int = 200, seed: int = 42, device: str = "auto",
    upsample: int | str = "auto", scheduler: str | None = None, workers: int | None = None,
    progress: ProgressArg = True, load_options: Mapping[str, Any] | None = None,
) -> SeriesResult:
    """Fit every scan of a series (see docs/series.md).

    ``sources``: file paths (each worker loads its own) or ``Dataset4D`` objects.
    ``client``: a ``distributed.Client`` to run on; else ``scheduler`` (an address) is
    joined, else an embedded cluster is started (one worker per GPU, or ``workers`` CPU
    processes) and closed afterwards. ``reference``: the scan whose full-field fit the
    others start from (an index, a path — in the series or not — or a dataset; default
    the first scan that fits). ``fixed``: names held in every other scan at the
    reference's fitted values (``("C12", "phi12")`` or ``"C12,phi12"``), or a mapping of
    values held everywhere. ``warm_start``: True (every scan starts from the reference's
    calibration), ``"previous"`` (from the previous scan's fit: a chain, one scan at a
    time) or False (a full fit per scan, at the held values). ``out``: the folder every
    result is written to as it finishes; a rerun skips the finished ones. ``average``:
    a drift-corrected average of the phases (``out/average.emd`` and its record).
    ``load_options``: ``livessb.load`` keywords for files that lack calibration values.
    ``progress``: a tqdm bar, or a callable (record, done, total).
    """
    if out is None:
        raise SeriesError("fit_series needs out=DIR: every scan's result is written there "
                          "as it finishes (and a rerun skips the finished ones)")
    if trials < 1:
        raise SeriesError(f"trials must be at least 1, got {trials}")
    mode = warm_mode(warm_start)
    held_spec = fixed_spec(fixed)
    scans, missing = resolve_sources(sources)
    candidates, chosen = choose_reference(reference, scans, missing)
    plan = FitPlan(trials, seed, device, upsample, dict(load_options or {}))
    store = SeriesStore(out)
    bar = SeriesProgress(progress, len(scans) + (candidates[0].index < 0))
    t0 = time.perf_counter()
    handle = connect(client, scheduler, workers, device, say=bar.say)
    records: dict[int, dict[str, Any]] = {m["index"]: m for m in missing}
    for m in missing:
        bar.say(f"skipped scan {m['index']}: {m['error']}")
    bar.start()
    kept: list[int] = []
    ref_record: dict[str, Any] | None = None
    status = "interrupted"
    try:
        ref_scan, ref_record = _fit_reference(handle, store, plan, held_spec, candidates,
                                              chosen, records, kept, bar)
        held = held_values(held_spec, ref_record["params"])
        _fit_others(handle, store, plan, held_spec, held, mode, ref_scan, ref_record, scans,
                    records, kept, bar)
        status = "complete"
    finally:
        bar.close()
        ordered = [records[i] for i in sorted(records) if i >= 0]
        avg = None
        if status == "complete" and average:
            avg = average_scans(store, ordered, ref_record, plan)
        store.write_summary(summary_document(
            status, ordered, ref_record, kept, avg, handle.description,
            {"mode": mode, "fixed": held_spec, "plan": plan}, time.perf_counter() - t0,
            datetime.now(UTC)))
        handle.close()
    assert ref_record is not None
    return SeriesResult(records=ordered, reference=int(ref_record["index"]), out=store.root,
                        kept=kept, average=avg, cluster=handle.description)


def _fit_reference(
    handle: ClusterHandle, store: SeriesStore, plan: FitPlan, held_spec: Fixed,
    candidates: list[ScanSource], chosen: bool, records: dict[int, dict[str, Any]],
    kept: list[int], bar: SeriesProgress,
) -> tuple[ScanSource, dict[str, Any]]:
    """The reference's record: kept from an earlier run, or fitted now; a default
    reference that fails hands over to the next scan."""
    user_values = dict(held_spec) if isinstance(held_spec, dict) else {}
    for scan in candidates:
        key, _ = scan_keys(plan, held_spec, "reference", scan, [])
        record = store.finished(scan, key)
        if record is not None:
            kept.append(scan.index)
        else:
            job = ScanJob(scan, "reference", str(store.root), key, plan, held=user_values)
            record = handle.client.submit(
                run_scan, job, key=f"livessb-reference-{scan.stem}-{uuid.uuid4().hex[:8]}",
            ).result()
        records[scan.index] = compact(record)
        bar.scan_done(record, kept=scan.index in kept)
        if record["status"] == "done":
            return scan, record
        if chosen:
            raise SeriesError(f"the reference scan {scan.label} could not be fitted "
                              f"({record.get('error')}): choose another with --reference")
    raise SeriesError("no scan of the series could be fitted as the reference: "
                      + "; ".join(f"{r['label']}: {r.get('error')}" for r in records.values()
                                  if r.get("status") != "done"))


def _fit_others(
    handle: ClusterHandle, store: SeriesStore, plan: FitPlan, held_spec: Fixed,
    held: dict[str, float], mode: str, ref_scan: ScanSource, ref_record: dict[str, Any],
    scans: list[ScanSource], records: dict[int, dict[str, Any]], kept: list[int],
    bar: SeriesProgress,
) -> None:
    """Submit every scan not finished before (a chain's scans depend on their
    predecessor's future), collect the records as they come."""
    from distributed import as_completed

    _, keys = scan_keys(plan, held_spec, mode, ref_scan, scans)
    calibration = str(store.calibration_path(ref_scan))
    start = dict(ref_record["params"])
    futures = {}
    for chain in chains(ref_scan, scans, mode):
        previous: Any = ref_record
        for scan in chain:
            record = store.finished(scan, keys[scan.index])
            if record is not None:
                kept.append(scan.index)
                records[scan.index] = compact(record)
                bar.scan_done(record, kept=True)
                previous = record
                continue
            job = ScanJob(scan, "scan", str(store.root), keys[scan.index], plan, held=held,
                          calibration=calibration, warm=mode != "off", start=start,
                          start_from=f"reference scan {ref_scan.label}",
                          chained=mode == "previous")
            future = handle.client.submit(run_scan, job, previous if job.chained else None,
                                          key=f"livessb-{scan.stem}-{uuid.uuid4().hex[:8]}")
            futures[future] = scan
            previous = future
    for future in as_completed(list(futures)):
        scan = futures[future]
        try:
            record = future.result()
        except Exception as exc:  # e.g. KilledWorker: its workers died every time
            record = store.write_failed(scan, keys[scan.index], "failed",
                                        f"{type(exc).__name__}: {exc}", "scan",
                                        {"worker": "?"})
        records[scan.index] = compact(record)
        bar.scan_done(record)

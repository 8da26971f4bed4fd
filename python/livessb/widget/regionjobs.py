"""A widget's regions on the worker: queue, fit, publish, restore, remove (docs/widget-protocol.md).

Each edit of a region queues its fit under the region's key; the scheduler keeps one
queued fit per key (a newer edit replaces it), so the next fit always starts from the
newest edit. Publishing follows one rule per region: a crop is sent only if its edit
is newer than the region's *floor*, the generation of the last crop published or of
the region's removal. So a crop never replaces a newer one, and a removed region
never gets one (its removal's generation is higher than any fit still running).

With live regions on, a fit overtaken by newer edits while it ran is still published,
marked ``behind`` (edits between it and the latest): during a drag every fit is
overtaken, and dropping them (as before) painted nothing until the release (issue 19).
With live regions off an edit is a release, the newer position's fit is already queued
and an overtaken result is dropped, as before.
"""

from __future__ import annotations

import functools
import time
import traceback
from typing import TYPE_CHECKING, Any

from ..fit.progress import ProgressCallback
from ..render import phase_to_png
from .records import bounds_of, region_dict, region_record

if TYPE_CHECKING:
    from ..results import RegionResult
    from .widget import SSBWidget

__all__ = ["RegionJobs"]

Bounds = tuple[int, int, int, int]


class RegionJobs:
    """Runs and publishes one widget's region fits (the widget's worker and lock)."""

    def __init__(self, widget: SSBWidget) -> None:
        self._w = widget
        # rid -> generation of the last crop published for it, or of its removal
        self._floor: dict[str, int] = {}

    def _latest(self, rid: str) -> int:
        return self._w._scheduler.generation(rid)

    def _behind(self, rid: str) -> int:
        """Edits the region's painted crop trails its latest edit (caller holds the lock)."""
        return max(0, self._latest(rid) - self._floor.get(rid, 0))

    # ------------------------------------------------ edits (caller holds the lock)
    def queue(self, results: dict[str, Any], rid: str, bounds: Bounds) -> None:
        """Fit queued (latest wins); the record says fitting with the latest generation."""
        w = self._w
        w._busy.add(rid)
        w._submit(rid, lambda gen: self._run(rid, bounds, gen))
        prev = results.get(rid, {})
        results[rid] = {**prev, "status": "fitting", "generation": self._latest(rid),
                        "behind": self._behind(rid), "error": "", "bounds": list(bounds),
                        "params": prev.get("params", {}), "loss": prev.get("loss"),
                        "step": ""}

    def remove(self, results: dict[str, Any], rid: str) -> None:
        """The region is gone: its record and crop dropped, its fits never published."""
        w = self._w
        results.pop(rid, None)
        w._crops.pop(rid, None)
        w._busy.discard(rid)
        # under the region's key: replaces its queued fit, stales the running one
        w._submit(rid, functools.partial(self._remove_from_session, rid))
        self._floor[rid] = self._latest(rid)

    def refit(self, regions: list[dict[str, Any]]) -> None:
        """Each of ``regions`` fitted again (queued; its record says fitting)."""
        w = self._w
        with w._lock:
            results = dict(w.region_results)
            for r in regions:
                self.queue(results, r["id"], bounds_of(r))
            w.region_results = results
            w._update_status()

    def retry_failed(self) -> None:
        """After a full-field fit: regions that failed (e.g. drawn before it) are fitted again."""
        w = self._w
        with w._lock:
            failed = [r for r in w.regions
                      if w.region_results.get(r["id"], {}).get("status") == "error"]
            if failed:
                self.refit(failed)

    def restore(self) -> None:
        """Every region of a restored session shown from its stored fit, none refitted."""
        w = self._w
        regions = [region_dict(rid, reg.bounds) for rid, reg in w.session.regions.items()]
        w._applying = True
        try:
            w.regions = regions
        finally:
            w._applying = False
        results: dict[str, Any] = {}
        for r in regions:
            rid = r["id"]
            w._busy.add(rid)
            w._submit(rid, functools.partial(self._show_restored, rid))
            results[rid] = {"status": "fitting", "params": {}, "loss": None, "step": "",
                            "generation": self._latest(rid), "behind": self._behind(rid),
                            "error": "", "bounds": list(bounds_of(r))}
        w.region_results = results

    # ------------------------------------------------------------ worker jobs
    def _run(self, rid: str, bounds: Bounds, gen: int) -> None:
        w = self._w
        t0 = time.perf_counter()
        model = w.object_model
        # only crystal mode's steps take long enough for the panel to say which one runs
        steps = self._steps(rid, gen) if model == "lattice" else False
        try:
            reg = w.session.fit_region(bounds, trials=w.trials, seed=w.seed,
                                       region_id=rid, progress=steps, object_model=model)
            png = phase_to_png(reg.phase)
        except Exception as exc:
            traceback.print_exception(exc)
            self._failed(rid, gen, f"{type(exc).__name__}: {exc}")
            return
        self.publish(rid, gen, reg, png, time.perf_counter() - t0)

    def _steps(self, rid: str, gen: int) -> ProgressCallback:
        """The fit's crystal-mode steps (seconds each on a CPU) into the region's record as
        ``step`` ("crystal mode 2/5") while edit ``gen`` is the region's latest."""
        def report(stage: str, done: int, total: int) -> None:
            if stage != "lattice":
                return
            w = self._w
            with w._lock:
                if (w._closed or not w._scheduler.is_current(rid, gen)
                        or rid not in w.region_results):
                    return
                res = dict(w.region_results)
                res[rid] = {**res[rid], "step": f"crystal mode {done}/{total}"}
                w.region_results = res
        return report

    def _failed(self, rid: str, gen: int, text: str) -> None:
        w = self._w
        with w._lock:
            if not w._scheduler.is_current(rid, gen):
                return  # a newer edit owns the region: its result decides
            w._busy.discard(rid)
            res = dict(w.region_results)
            if rid in res:
                res[rid] = {**res[rid], "status": "error", "error": text, "step": ""}
            with w.hold_sync():
                w.region_results = res
                w._set_error(f"region {rid}: {text}")

    def publish(self, rid: str, gen: int, reg: RegionResult, png: bytes, elapsed: float) -> None:
        """Send the crop of edit ``gen`` if it is newer than the floor (see the module doc)."""
        w = self._w
        with w._lock:
            if w._closed or gen <= self._floor.get(rid, 0):
                return  # a newer crop is painted, or the region was removed
            current = w._scheduler.is_current(rid, gen)
            if not current and not w.live_regions:
                return  # stale: the newer edit's fit is queued and decides
            self._floor[rid] = gen
            latest = self._latest(rid)
            shape = [int(n) for n in reg.crop.shape]
            w._crops[rid] = (gen, png, shape)
            res = dict(w.region_results)
            record = region_record(reg, gen, elapsed)
            if current:
                w._busy.discard(rid)
            else:  # the newer edit's fit is queued: the region is still fitting
                record.update(status="fitting", generation=latest,
                              bounds=res.get(rid, record)["bounds"])
            res[rid] = {**record, "behind": latest - gen, "step": ""}
            with w.hold_sync():
                if w._error.startswith(f"region {rid}:"):  # this region's error is resolved
                    if w.message == w._error:
                        w.message = ""
                    w._error = ""
                w.region_results = res
                w._update_status()
            w.send({"type": "crop", "id": rid, "generation": gen, "behind": latest - gen,
                    "shape": shape}, buffers=[png])

    def _remove_from_session(self, rid: str, _generation: int = 0) -> None:
        w = self._w
        if rid in w.session.regions and not any(r["id"] == rid for r in w.regions):
            w.session.remove_region(rid)

    def _show_restored(self, rid: str, gen: int) -> None:
        w = self._w
        reg = w.session.regions[rid]
        crop = reg.crop
        if crop is None or getattr(crop, "object", None) is None or crop.object.size == 0:
            crop = w.session.reconstruct(reg.params, crop=reg.bounds)
            reg.crop = crop
        self.publish(rid, gen, reg, phase_to_png(crop.phase), 0.0)

"""SSBWidget: the notebook front end of a resident SSB session.

Thin: synced traits <-> Session calls. All session work (fits, reconstructions,
saving) runs in order on ONE background worker thread, never on the comm
thread. Each region carries a generation counter; a result whose generation is
no longer the latest for its region is discarded (latest wins). Crops travel as
PNG bytes in custom messages with binary buffers, never in the widget state, so
notebooks stay small.
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anywidget
import numpy as np
import traitlets

from .render import phase_to_png

if TYPE_CHECKING:
    from .dataset import Dataset4D
    from .results import FitResult, RegionResult
    from .session import Session

__all__ = ["FrontendBuildError", "SSBWidget", "bundle_paths"]

_STATIC = Path(__file__).parent / "static"
_BOUND_KEYS = ("row_start", "row_stop", "col_start", "col_stop")
_REGION_KEYS = ("id", *_BOUND_KEYS)
STATUSES = ("idle", "fitting", "done", "error")
SCAN_PNG_MAX_PX = 1024  # the full-field image is display-only (canvas ~512 CSS px, HiDPI x2)


class FrontendBuildError(RuntimeError):
    """The built front end (static/widget.js) is missing."""


def bundle_paths() -> tuple[Path, Path]:
    """Paths of the built ES module and its CSS; raises if the build is missing."""
    js, css = _STATIC / "widget.js", _STATIC / "widget.css"
    if not js.is_file():
        raise FrontendBuildError(
            f"livessb widget front end not built: {js} is missing. Build it from the "
            "repository root with `scripts/build-frontend.sh` (npm ci && npm run build).")
    return js, css


def _bounds(region: dict[str, Any]) -> tuple[int, int, int, int]:
    return tuple(int(region[k]) for k in _BOUND_KEYS)  # type: ignore[return-value]


def _region_dict(region_id: str, bounds: tuple[int, int, int, int]) -> dict[str, Any]:
    return {"id": region_id, **{k: int(b) for k, b in zip(_BOUND_KEYS, bounds, strict=True)}}


def _float_params(params: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in params.items()}


def _shutdown(executor: concurrent.futures.ThreadPoolExecutor, session: Any, owns: bool) -> None:
    """Finalizer (no reference to the widget): stop the worker, close the session."""
    executor.shutdown(wait=False, cancel_futures=True)
    if owns and session is not None and not getattr(session, "closed", True):
        try:
            session.close()
        except Exception:
            pass


class SSBWidget(anywidget.AnyWidget):  # type: ignore[misc]
    """Interactive SSB widget: full-field phase, regions drawn on the scan, crops per region.

    ``SSBWidget(data_or_session, calibration=None, fit=True, trials=200, seed=42, device="auto")``

    * ``calibration``: restore the full-field fit and every region from a
      calibration file, running no fit (crops are reconstructed, not refitted).
    * ``fit``: without calibration, run the full-field fit in the background.
    * A :class:`~livessb.Session` passed in is used as is and left open by
      :meth:`close`; a session the widget creates is closed by :meth:`close`.
    """

    # --- Python -> JS -------------------------------------------------------
    scan_png = traitlets.Bytes(b"").tag(sync=True)  # full-field phase PNG (display, <= 1024 px)
    scan_shape = traitlets.List(traitlets.Int(), default_value=[1, 1]).tag(sync=True)  # scan px
    upsample = traitlets.Int(1).tag(sync=True)  # output px per scan px (reconstruction, crops)
    status = traitlets.Enum(STATUSES, default_value="idle").tag(sync=True)
    message = traitlets.Unicode("").tag(sync=True)  # errors and notices shown in the widget
    full_fit = traitlets.Dict().tag(sync=True)  # {params, loss, rotation_deg, transpose}
    # id -> {status, params, loss, generation, error, bounds, elapsed_s}
    region_results = traitlets.Dict().tag(sync=True)
    # --- JS <-> Python ------------------------------------------------------
    # [{id, row_start, row_stop, col_start, col_stop}], scan px, stops exclusive
    regions = traitlets.List(traitlets.Dict()).tag(sync=True)

    def __init__(self, data_or_session: Dataset4D | Session, calibration: str | Path | None = None,
                 fit: bool = True, trials: int = 200, seed: int = 42, device: str = "auto",
                 **kwargs: Any) -> None:
        js, css = bundle_paths()
        self._esm = js.read_text(encoding="utf-8")
        if css.is_file():
            self._css = css.read_text(encoding="utf-8")
        from .session import Session

        # The session first: if the data is unusable, no comm is opened.
        calibration_error = ""
        if isinstance(data_or_session, Session):
            session, owns = data_or_session, False
        else:
            owns = True
            try:
                session = Session(data_or_session, device=device, calibration=calibration)
            except Exception as exc:
                if calibration is None:
                    raise
                # refused (corrupt or mismatched): shown in the widget, nothing restored
                calibration_error = f"calibration {str(calibration)!r} refused: {exc}"
                session = Session(data_or_session, device=device)
        self._session: Session = session
        self._owns_session = owns

        self.trials = int(trials)
        self.seed = int(seed)
        self._lock = threading.RLock()
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="livessb-widget")
        self._futures: set[concurrent.futures.Future[Any]] = set()
        self._generation: dict[str, int] = {}  # latest generation per region id
        self._crops: dict[str, tuple[int, bytes, list[int]]] = {}  # id -> (generation, png, shape)
        self._busy: set[str] = set()  # "full" and region ids with work in flight
        self._error = ""  # widget-level error (cleared by the next successful action)
        self._applying = False  # regions set by the widget itself: no jobs
        self._resend_regions = False
        self._regions_ok: list[dict[str, Any]] = []  # last accepted value of `regions`
        self._closed = False
        self._finalizer = weakref.finalize(
            self, _shutdown, self._executor, self._session, self._owns_session)
        super().__init__(**kwargs)

        self._dataset: Dataset4D = self._session.dataset
        self.scan_shape = [int(n) for n in self._dataset.scan_shape]
        self.on_msg(self._on_custom_msg)

        if calibration_error:
            self._set_error(calibration_error)
            self._submit("full", self._show_uncorrected)
        elif self._session.full_fit is not None:
            self._restore_view()
        elif fit:
            self._busy.add("full")
            self._update_status()
            self._submit("full", self._run_full_fit)
        else:
            self.message = "no calibration: call w.fit() to fit the full field"
            self._submit("full", self._show_uncorrected)

    # ------------------------------------------------------------------ API
    @property
    def session(self) -> Session:
        return self._session

    def fit(self, wait: bool = False) -> None:
        """(Re)run the full-field fit in the background; ``wait=True`` blocks until done."""
        self._check_open()
        with self._lock:
            self._busy.add("full")
            self._update_status()
        fut = self._submit("full", self._run_full_fit)
        if wait:
            fut.result()

    def wait(self, timeout: float | None = None) -> None:
        """Block until all queued work is done (for scripts and tests)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                pending = [f for f in self._futures if not f.done()]
            if not pending:
                return
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            done, _ = concurrent.futures.wait(pending, timeout=left)
            if deadline is not None and time.monotonic() >= deadline and len(done) < len(pending):
                raise TimeoutError("widget work still running")

    def save_calibration(self, path: str | Path = "calibration.json") -> Path:
        """Save rotation, full-field and region fits (after queued work finishes)."""
        self._check_open()
        return self._submit("save", lambda: self._save(Path(path))).result()

    def crop_png(self, region_id: str) -> bytes | None:
        """The latest crop PNG sent for a region (None until one exists)."""
        entry = self._crops.get(region_id)
        return None if entry is None else entry[1]

    def close(self, wait: bool = True) -> None:
        """Stop the worker, close the session (if the widget made it), close the comm."""
        if getattr(self, "_closed", True):  # closed already, or __init__ failed early
            super().close()
            return
        self._closed = True
        with self._lock:
            for f in self._futures:
                f.cancel()
        self._executor.shutdown(wait=wait, cancel_futures=True)
        if self._owns_session and not self._session.closed:
            self._session.close()
        self._finalizer.detach()
        self._crops.clear()
        super().close()

    # --------------------------------------------------------- validation
    @traitlets.validate("regions")
    def _validate_regions(self, proposal: dict[str, Any]) -> list[dict[str, Any]]:
        value = proposal["value"]
        try:
            return self._check_regions(value)
        except ValueError as exc:
            # Never raise into the comm: keep the previous value, show why.
            self._resend_regions = True
            with self._lock:
                self._set_error(f"region edit rejected: {exc}")
            # (inside hold_trait_notifications self.regions already holds the bad value)
            return [dict(r) for r in self._regions_ok]

    def _check_regions(self, value: Any) -> list[dict[str, Any]]:
        if not isinstance(value, list | tuple):
            raise ValueError("regions must be a list")
        nr, nc = (int(n) for n in self.scan_shape)
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        for item in value:
            if not isinstance(item, dict) or not set(_REGION_KEYS) <= set(item):
                raise ValueError(f"a region needs keys {list(_REGION_KEYS)}: {item!r}")
            rid = item["id"]
            if not isinstance(rid, str) or not rid:
                raise ValueError(f"region id must be a non-empty string: {rid!r}")
            if rid in seen:
                raise ValueError(f"duplicate region id {rid!r}")
            seen.add(rid)
            try:
                r0, r1, c0, c1 = (int(item[k]) for k in _BOUND_KEYS)
            except (TypeError, ValueError):
                raise ValueError(f"region {rid!r}: bounds must be integers") from None
            if not (r1 > r0 and c1 > c0):
                raise ValueError(f"region {rid!r} is empty: rows {r0}:{r1}, cols {c0}:{c1}")
            if r0 < 0 or c0 < 0 or r1 > nr or c1 > nc:
                raise ValueError(
                    f"region {rid!r} rows {r0}:{r1}, cols {c0}:{c1} is outside the "
                    f"{nr}×{nc} scan")
            out.append(_region_dict(rid, (r0, r1, c0, c1)))
        return out

    def set_state(self, sync_data: dict[str, Any]) -> None:
        super().set_state(sync_data)
        if self._resend_regions:  # the front end holds a rejected edit: send ours back
            self._resend_regions = False
            self.send_state("regions")

    # ---------------------------------------------------------- region edits
    @traitlets.observe("regions")
    def _on_regions(self, change: dict[str, Any]) -> None:
        self._regions_ok = [dict(r) for r in change["new"]]
        if self._applying or self._closed or change["old"] == change["new"]:
            return
        old = {r["id"]: _bounds(r) for r in change["old"]}
        new = {r["id"]: _bounds(r) for r in change["new"]}
        with self._lock:
            if self._error and self.message == self._error:
                self.message = ""
            self._error = ""
            results = dict(self.region_results)
            for rid in old.keys() - new.keys():
                self._generation[rid] = self._generation.get(rid, 0) + 1  # stales in-flight work
                results.pop(rid, None)
                self._crops.pop(rid, None)
                self._busy.discard(rid)
                self._submit(rid, functools.partial(self._remove, rid))
            for rid, bounds in new.items():
                if old.get(rid) != bounds:
                    self._queue_region(results, rid, bounds)
            self.region_results = results
            self._update_status()

    def _queue_region(self, results: dict[str, Any], rid: str,
                      bounds: tuple[int, int, int, int]) -> None:
        """New generation for the region, status fitting, job queued (caller holds the lock)."""
        gen = self._generation.get(rid, 0) + 1
        self._generation[rid] = gen
        prev = results.get(rid, {})
        results[rid] = {**prev, "status": "fitting", "generation": gen, "error": "",
                        "bounds": list(bounds),
                        "params": prev.get("params", {}), "loss": prev.get("loss")}
        self._busy.add(rid)
        self._submit(rid, functools.partial(self._run_region, rid, bounds, gen))

    def _retry_failed_regions(self) -> None:
        """After a full-field fit: regions that failed (e.g. drawn before it) are fitted again."""
        with self._lock:
            results = dict(self.region_results)
            failed = [r for r in self.regions if results.get(r["id"], {}).get("status") == "error"]
            if not failed:
                return
            for r in failed:
                self._queue_region(results, r["id"], _bounds(r))
            self.region_results = results
            self._update_status()

    # ------------------------------------------------------------- worker jobs
    def _submit(self, key: str, fn: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        def job() -> Any:
            if self._closed:
                return None
            try:
                return fn()
            except Exception as exc:
                self._job_failed(key, exc)
                if key == "save":
                    raise
                return None

        fut = self._executor.submit(job)
        with self._lock:
            self._futures = {f for f in self._futures if not f.done()}
            self._futures.add(fut)
        return fut

    def _job_failed(self, key: str, exc: BaseException) -> None:
        text = f"{type(exc).__name__}: {exc}"
        traceback.print_exception(exc)
        if self._closed:
            return
        with self._lock:
            self._busy.discard(key)
            if key in self._generation:
                res = dict(self.region_results)
                if key in res:
                    res[key] = {**res[key], "status": "error", "error": text}
                    self.region_results = res
                self._set_error(f"region {key}: {text}")
            elif key == "save":
                self._set_error(f"save failed: {text}")
            else:
                self._set_error(text)

    def _run_full_fit(self) -> None:
        fit = self._session.fit(trials=self.trials, seed=self.seed, progress=False)
        self._show_full(fit)
        self._retry_failed_regions()

    def _show_full(self, fit: FitResult) -> None:
        rec = self._session.reconstruct(fit.params)
        png = phase_to_png(rec.phase, max_px=SCAN_PNG_MAX_PX)
        if self._closed:
            return
        with self._lock, self.hold_sync():
            self.full_fit = {"params": _float_params(fit.params), "loss": float(fit.loss),
                             "rotation_deg": float(fit.rotation_deg),
                             "transpose": bool(fit.transpose)}
            self.upsample = int(rec.upsample)
            self.scan_png = png
            self._busy.discard("full")
            self._update_status()

    def _show_uncorrected(self) -> None:
        """No fit yet: show the bright-field image (BF-disk integrated counts)."""
        ds = self._dataset
        bf_disk = ds.bright_field
        cr, cc, rad = bf_disk.center_row, bf_disk.center_col, bf_disk.radius_px
        kr, kc = ds.detector_shape
        yy, xx = np.ogrid[:kr, :kc]
        mask = (yy - cr) ** 2 + (xx - cc) ** 2 <= rad**2
        counts = np.asarray(ds.counts)
        bf = counts.reshape(*counts.shape[:2], -1)[:, :, mask.ravel()].sum(-1, dtype=np.float64)
        png = phase_to_png(bf, max_px=SCAN_PNG_MAX_PX)
        if self._closed:
            return
        with self._lock, self.hold_sync():
            self.upsample = 1
            self.scan_png = png
            self._busy.discard("full")
            self._update_status()

    def _run_region(self, rid: str, bounds: tuple[int, int, int, int], gen: int) -> None:
        if self._generation.get(rid) != gen:
            return  # superseded before it started
        t0 = time.perf_counter()
        try:
            reg = self._session.fit_region(bounds, trials=self.trials, seed=self.seed,
                                           region_id=rid, progress=False)
            png = phase_to_png(reg.phase)
        except Exception as exc:
            traceback.print_exception(exc)
            self._region_failed(rid, gen, f"{type(exc).__name__}: {exc}")
            return
        self._publish_region(rid, gen, reg, png, time.perf_counter() - t0)

    def _region_failed(self, rid: str, gen: int, text: str) -> None:
        with self._lock:
            if self._closed or self._generation.get(rid) != gen:
                return  # a newer edit owns the region: its result decides
            self._busy.discard(rid)
            res = dict(self.region_results)
            if rid in res:
                res[rid] = {**res[rid], "status": "error", "error": text}
            with self.hold_sync():
                self.region_results = res
                self._set_error(f"region {rid}: {text}")

    def _publish_region(self, rid: str, gen: int, reg: RegionResult, png: bytes,
                        elapsed: float) -> None:
        with self._lock:
            if self._closed or self._generation.get(rid) != gen:
                return  # stale: a newer edit (or a removal) owns this region now
            shape = [int(n) for n in reg.crop.shape]
            self._crops[rid] = (gen, png, shape)
            res = dict(self.region_results)
            res[rid] = {"status": "done", "params": _float_params(reg.params),
                        "loss": float(reg.fit.loss), "generation": gen, "error": "",
                        "bounds": [int(b) for b in reg.bounds], "elapsed_s": round(elapsed, 4)}
            self._busy.discard(rid)
            with self.hold_sync():
                if self._error.startswith(f"region {rid}:"):  # this region's error is resolved
                    if self.message == self._error:
                        self.message = ""
                    self._error = ""
                self.region_results = res
                self._update_status()
            self.send({"type": "crop", "id": rid, "generation": gen, "shape": shape},
                      buffers=[png])

    def _remove(self, rid: str) -> None:
        if rid in self._session.regions and not any(r["id"] == rid for r in self.regions):
            self._session.remove_region(rid)

    def _save(self, path: Path) -> Path:
        # Only regions the widget shows, with their latest result, go to the file.
        current = {r["id"]: _bounds(r) for r in self.regions}
        for rid in list(self._session.regions):
            reg = self._session.regions[rid]
            if rid not in current or tuple(reg.bounds) != current[rid]:
                self._session.remove_region(rid)
        out = Path(self._session.save_calibration(path))
        with self._lock:
            self._error = ""
            self.message = f"calibration saved to {out}"
            self._update_status()
        return out

    def _restore_view(self) -> None:
        """Show a restored (or pre-fitted) session: full field + every region, no fitting."""
        s = self._session
        regions = [_region_dict(rid, reg.bounds) for rid, reg in s.regions.items()]
        with self._lock:
            self._busy.add("full")
            results: dict[str, Any] = {}
            for r in regions:
                self._generation[r["id"]] = 1
                self._busy.add(r["id"])
                results[r["id"]] = {"status": "fitting", "params": {}, "loss": None,
                                    "generation": 1, "error": "", "bounds": list(_bounds(r))}
            self._applying = True
            try:
                self.regions = regions
            finally:
                self._applying = False
            self.region_results = results
            self._update_status()
        if s.full_fit is not None:
            self._submit("full", lambda: self._show_full(s.full_fit))  # type: ignore[arg-type]
        for rid in list(s.regions):
            self._submit(rid, functools.partial(self._show_restored_region, rid))

    def _show_restored_region(self, rid: str) -> None:
        reg = self._session.regions[rid]
        crop = reg.crop
        if crop is None or getattr(crop, "object", None) is None or crop.object.size == 0:
            crop = self._session.reconstruct(reg.params).crop(reg.bounds)
            reg.crop = crop
        self._publish_region(rid, self._generation.get(rid, 1), reg, phase_to_png(crop.phase),
                             0.0)

    # ----------------------------------------------------------- messages
    def _on_custom_msg(self, _widget: Any, content: dict[str, Any], _buffers: list[Any]) -> None:
        try:
            kind = content.get("type") if isinstance(content, dict) else None
            if kind == "request_crops":
                for rid, (gen, png, shape) in list(self._crops.items()):
                    self.send({"type": "crop", "id": rid, "generation": gen, "shape": shape},
                              buffers=[png])
            elif kind == "save":
                path = str(content.get("path") or "calibration.json")
                self.message = f"saving calibration to {path} …"
                self._submit("save", lambda: self._save(Path(path)))
        except Exception as exc:  # never raise into the comm
            self._set_error(f"{type(exc).__name__}: {exc}")

    # ------------------------------------------------------------- status
    def _set_error(self, text: str) -> None:
        self._error = text
        self.message = text
        self._update_status()

    def _update_status(self) -> None:
        if self._busy:
            status = "fitting"
        elif self._error or any(r.get("status") == "error" for r in self.region_results.values()):
            status = "error"
        elif self.full_fit:
            status = "done"
        else:
            status = "idle"
        self.status = status

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the widget is closed")

"""SSBWidget: the notebook front end of a resident SSB session (traits and handlers).

Thin: synced traits <-> Session calls. All session work (fits, previews,
reconstructions, saving, exports) runs on ONE worker thread (``Scheduler``),
latest wins per key: a region's queued fit is replaced by a newer edit (a
result overtaken while it ran is published only with live regions on, marked
``behind``: regionjobs.py), a preview superseded before it starts never runs.
Crops (PNG) and frames (uint16) travel as custom messages with binary buffers,
never in the widget state. docs/widget-protocol.md is the wire.
"""

from __future__ import annotations

import functools
import threading
import traceback
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anywidget
import traitlets

from ..fit.lattice import OBJECT_MODELS
from ..fit.systematic import why_not_determined
from ..params import table_for_frontend
from ..preview import Frame, render_preview
from ..regions import MIN_REGION_PX
from ..render import phase_to_png
from ..virtual import IMAGES
from . import bundle
from .cancel import CancelJobs
from .diffractionview import DiffractionView
from .frames import FrameStream
from .mapjobs import MapJobs
from .messages import Messages
from .progress import IDLE, ProgressReporter
from .records import (
    best_trials,
    bounds_of,
    checked_regions,
    full_fit_record,
    with_search_trials,
)
from .regionjobs import RegionJobs
from .scheduler import Scheduler, WidgetClosedError
from .virtualview import VirtualView

if TYPE_CHECKING:
    from concurrent.futures import Future

    from ..dataset import Dataset4D
    from ..results import FitResult
    from ..session import Session

__all__ = ["SSBWidget", "WidgetClosedError"]

STATUSES = ("idle", "fitting", "done", "error")
SCAN_PNG_MAX_PX = 1024  # display-only images (canvas ~512 CSS px, HiDPI x2)


def _closed_text(what: str) -> str:
    return (f"{what} refused: this widget is closed — create a new livessb.SSBWidget "
            "(optionally with calibration=...) to keep working")


def _shutdown(scheduler: Scheduler, session: Any, owns: bool) -> None:
    """Finalizer (no reference to the widget): stop the worker, close the session."""
    scheduler.shutdown(wait=False)
    if owns and session is not None and not getattr(session, "closed", True):
        try:
            session.close()
        except Exception:
            pass


class SSBWidget(anywidget.AnyWidget):  # type: ignore[misc]
    """Interactive SSB widget: full-field phase, live steering, regions with crops.

    ``SSBWidget(data_or_session, calibration=None, fit=True, trials=200, seed=42,
    device="auto", live_regions=None)``

    * ``calibration``: restore the full-field fit and every region from a
      calibration file, running no fit (crops are reconstructed, not refitted).
    * ``fit``: without calibration, run the full-field fit in the background.
    * ``live_regions``: refit regions while they are dragged (default: on for
      CUDA, off for the CPU).
    * A :class:`~livessb.Session` passed in is used as is and left open by
      :meth:`close`; a session the widget creates is closed by :meth:`close`.
    """

    # --- Python -> JS -------------------------------------------------------
    scan_png = traitlets.Bytes(b"").tag(sync=True)  # bright-field image before any fit
    scan_shape = traitlets.List(traitlets.Int(), default_value=[1, 1]).tag(sync=True)
    upsample = traitlets.Int(1).tag(sync=True)  # output px per scan px (reconstruction, crops)
    sampling_A = traitlets.List(traitlets.Float(), default_value=[1.0, 1.0]).tag(sync=True)
    status = traitlets.Enum(STATUSES, default_value="idle").tag(sync=True)
    message = traitlets.Unicode("").tag(sync=True)  # errors and notices shown in the widget
    param_table = traitlets.List(traitlets.Dict()).tag(sync=True)
    min_region_px = traitlets.Int(MIN_REGION_PX).tag(sync=True)
    full_fit = traitlets.Dict().tag(sync=True)  # records.full_fit_record
    trials_full = traitlets.List(traitlets.Dict()).tag(sync=True)  # [{n, params, loss}]
    progress = traitlets.Dict(dict(IDLE)).tag(sync=True)  # {stage, done, total, elapsed_s}
    # id -> {status, params, loss, generation, behind, error, bounds, elapsed_s, trials}
    region_results = traitlets.Dict().tag(sync=True)
    map_overlays = traitlets.Dict().tag(sync=True)  # mapjobs.map_record of the latest map
    # name -> {label, unit, shape, range, data}: the images before a fit (virtualview.py)
    virtual_images = traitlets.Dict(value_trait=traitlets.Dict()).tag(sync=True)
    cancellable = traitlets.Unicode("").tag(sync=True)  # the job cancel() would stop (cancel.py)
    cancelled = traitlets.Unicode("").tag(sync=True)  # the job last cancelled ("": none since)
    diffraction_info = traitlets.Dict().tag(sync=True)  # the pattern panel's (diffractionview.py)
    # --- JS <-> Python ------------------------------------------------------
    live_regions = traitlets.Bool(False).tag(sync=True)
    # how regions are fitted (Session.fit_region object_model): "lattice" is crystal mode
    object_model = traitlets.Enum(OBJECT_MODELS, default_value="per_bin").tag(sync=True)
    # [{id, row_start, row_stop, col_start, col_stop}], scan px, stops exclusive
    regions = traitlets.List(traitlets.Dict()).tag(sync=True)
    # what the scan view shows (root data-image): a virtual image until a fit's phase
    image = traitlets.Enum(IMAGES, default_value="virtual-bf").tag(sync=True)
    bf_pixels = traitlets.Int(0).tag(sync=True)  # BF pixels the image on screen sums; 0: all

    max_frame_px = SCAN_PNG_MAX_PX  # preview frames: longer side at most this

    def __init__(self, data_or_session: Dataset4D | Session, calibration: str | Path | None = None,
                 fit: bool = True, trials: int = 200, seed: int = 42, device: str = "auto",
                 live_regions: bool | None = None, **kwargs: Any) -> None:
        js, css = bundle.bundle_paths()
        self._esm = js.read_text(encoding="utf-8")
        if css.is_file():
            self._css = css.read_text(encoding="utf-8")
        from ..session import Session

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
        self._scheduler = Scheduler("livessb-widget", on_error=self._job_failed)
        self._crops: dict[str, tuple[int, bytes, list[int]]] = {}  # id -> (generation, png, shape)
        self._busy: set[str] = set()  # "full" and region ids with work in flight
        self._error = ""  # widget-level error (cleared by the next successful action)
        self._applying = False  # regions set by the widget itself: no jobs
        self._resend_regions = False
        self._regions_ok: list[dict[str, Any]] = []  # last accepted value of `regions`
        self._frames = FrameStream(self._send_custom)
        self._cancel = CancelJobs(self)  # before Messages: its handler is the "cancel" message
        self._maps = MapJobs(self)
        self._regions = RegionJobs(self)
        self._diffraction = DiffractionView(self)  # before Messages: its "pattern" handler
        self._messages = Messages(self)
        self._virtual = VirtualView(self)
        self._closed = False
        self._finalizer = weakref.finalize(
            self, _shutdown, self._scheduler, self._session, self._owns_session)
        if live_regions is None:
            live_regions = self._session.device == "cuda"
        super().__init__(live_regions=bool(live_regions), **kwargs)

        self._dataset: Dataset4D = self._session.dataset
        self.scan_shape = [int(n) for n in self._dataset.scan_shape]
        self.param_table = table_for_frontend()
        f = int(self._session.upsample_factor)
        self.upsample = f
        self.sampling_A = [float(s) / f for s in self._dataset.scan_step_A]
        self.diffraction_info = self._diffraction.info()
        self.on_msg(self._on_custom_msg)
        # first on the worker: an image from the counts while the first fit runs
        self._submit("virtual", lambda _g: self._virtual.publish())

        if calibration_error:
            self._set_error(calibration_error)
            self._submit("full", lambda _g: self._show_uncorrected())
        elif self._session.full_fit is not None:
            self._restore_view()
        elif fit:
            self._busy.add("full")
            self._update_status()
            self._cancel.submit("fit", "full", self._run_full_fit)
        else:
            self.message = "no calibration: call w.fit() to fit the full field"
            self._submit("full", lambda _g: self._show_uncorrected())

    # ------------------------------------------------------------------ API
    @property
    def session(self) -> Session:
        return self._session

    def fit(self, wait: bool = False) -> None:
        """(Re)run the full-field fit in the background; ``wait=True`` blocks until done."""
        self._check_open("fit()")
        with self._lock:
            self._busy.add("full")
            self._update_status()
        self._cancel.submit("fit", "full", self._run_full_fit)
        if wait:
            self.wait()

    def cancel(self) -> str | None:
        """Stop the running fit, refinement or map at its next progress report (within one
        search batch, Newton iteration or map tile), keeping every earlier result; returns
        the job's name ("fit", "refine", "map"), or None when none runs (docs/widget.md)."""
        self._check_open("cancel()")
        return self._cancel.cancel()

    def wait(self, timeout: float | None = None) -> None:
        """Block until all queued work is done (for scripts and tests)."""
        self._scheduler.wait(timeout)

    def save_calibration(self, path: str | Path = "calibration.json") -> Path:
        """Save rotation, full-field and region fits (after queued work finishes)."""
        self._check_open("save_calibration()")
        out: Path = self._submit("save", lambda _g: self._save(Path(path)), coalesce=False).result()
        return out

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
        self._scheduler.shutdown(wait=wait)
        if self._owns_session and not self._session.closed:
            self._session.close()
        self._finalizer.detach()
        self._crops.clear()
        super().close()

    # --------------------------------------------------------- validation
    @traitlets.validate("regions")
    def _validate_regions(self, proposal: dict[str, Any]) -> list[dict[str, Any]]:
        if getattr(self, "_closed", False):
            raise WidgetClosedError(_closed_text("region edit"))
        value = proposal["value"]
        try:
            return checked_regions(value, (int(self.scan_shape[0]), int(self.scan_shape[1])))
        except ValueError as exc:
            # Never raise into the comm: keep the previous value, show why.
            self._resend_regions = True
            with self._lock:
                self._set_error(f"region edit rejected: {exc}")
            # (inside hold_trait_notifications self.regions already holds the bad value)
            return [dict(r) for r in self._regions_ok]

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
        old = {r["id"]: bounds_of(r) for r in change["old"]}
        new = {r["id"]: bounds_of(r) for r in change["new"]}
        with self._lock:
            if self._error and self.message == self._error:
                self.message = ""
            self._error = ""
            results = dict(self.region_results)
            for rid in old.keys() - new.keys():
                self._regions.remove(results, rid)
            for rid, bounds in new.items():
                if old.get(rid) != bounds:
                    self._regions.queue(results, rid, bounds)
            self.region_results = results
            self._update_status()

    @traitlets.observe("object_model")
    def _on_object_model(self, change: dict[str, Any]) -> None:
        """Every region fitted again with the new object model (its crop replaced)."""
        if self._applying or self._closed or change["old"] == change["new"]:
            return
        self._regions.refit(self.regions)

    # ------------------------------------------------------------- worker jobs
    def _submit(self, key: str, fn: Callable[[int], Any], coalesce: bool = True) -> Future[Any]:
        """Queue ``fn(generation)`` on the worker under ``key`` (latest wins unless
        ``coalesce=False``); failures reach ``_job_failed``."""
        def job(gen: int) -> Any:
            return None if self._closed else fn(gen)

        return self._scheduler.submit(key, job, coalesce=coalesce)

    def _job_failed(self, key: str, exc: BaseException) -> None:
        text = f"{type(exc).__name__}: {exc}"
        traceback.print_exception(exc)
        if self._closed:
            return
        with self._lock:
            self._busy.discard(key)
            if key in self.region_results:
                res = dict(self.region_results)
                res[key] = {**res[key], "status": "error", "error": text}
                self.region_results = res
                self._set_error(f"region {key}: {text}")
            elif key in ("save", "preview", "export"):
                self._set_error(f"{key} failed: {text}")
            else:
                self.progress = dict(IDLE)
                self._set_error(text)

    def _run_full_fit(self) -> None:
        report = ProgressReporter(self._set_progress)
        with self._cancel.checked(report) as progress:
            fit = self._session.fit(trials=self.trials, seed=self.seed, progress=progress)
        report("reconstruct", 0, 1)
        self._show_full(fit)
        self._regions.retry_failed()

    def _start_refine(self, start: dict[str, float], fixed: dict[str, float]) -> None:
        """Newton from ``start`` with ``fixed`` held, in the background (the ``refine``
        message); the result replaces the full-field fit, a frame of it follows."""
        with self._lock:
            self._busy.add("full")
            self._update_status()
        self._cancel.submit("refine", "full", lambda: self._run_refine(start, fixed))

    def _run_refine(self, start: dict[str, float], fixed: dict[str, float]) -> None:
        report = ProgressReporter(self._set_progress)
        with self._cancel.checked(report) as progress:
            fit = self._session.refine(start, fixed=fixed or None, progress=progress)
        self._session.full_fit = with_search_trials(fit, self._session.full_fit)
        report("reconstruct", 0, 1)
        self._show_full(fit)

    def _set_progress(self, value: dict[str, Any]) -> None:
        if not self._closed:
            self.progress = value

    def _show_full(self, fit: FitResult, _generation: int = 0) -> None:
        """Publish a full-field fit and send a frame of its parameters."""
        frame = render_preview(self._session, fit.params, max_px=self.max_frame_px,
                               loss=fit.loss,  # the fit's own loss: no extra evaluation
                               bf_pixels=self._diffraction.bf_pixels())
        if self._closed:
            return
        with self._lock, self.hold_sync():
            self.full_fit = full_fit_record(fit)
            why = why_not_determined(fit.provenance.get("warnings", []))
            if why:  # e.g. a detector orientation the data do not decide: say so
                self.message = why[0]
            if fit.trials:  # a refine has no search: the last search's trials stay listed
                self.trials_full = best_trials(fit)
            self.progress = dict(IDLE)
            self._busy.discard("full")
            self._update_status()
            self.image = "phase"  # the fit's phase replaces a virtual image
        self._send_frame(frame, None)
        self._virtual.publish()  # iCoM at the fitted rotation

    def _show_uncorrected(self) -> None:
        """No fit yet: show the bright-field image (BF-disk integrated counts)."""
        png = phase_to_png(self._virtual.bright_field(), max_px=SCAN_PNG_MAX_PX)
        if self._closed:
            return
        with self._lock, self.hold_sync():
            self.scan_png = png
            self._busy.discard("full")
            self._update_status()

    def _save(self, path: Path) -> Path:
        # Only regions the widget shows, with their latest result, go to the file.
        current = {r["id"]: bounds_of(r) for r in self.regions}
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
        with self._lock:
            self._busy.add("full")
            if self._session.full_fit is not None:
                self._submit("full", functools.partial(self._show_full, self._session.full_fit))
            self._maps.restore()
            if any(reg.fit.lattice for reg in self._session.regions.values()):
                self._applying = True  # the box as the regions were fitted, none refitted
                try:
                    self.object_model = "lattice"
                finally:
                    self._applying = False
            self._regions.restore()
            self._update_status()

    # ------------------------------------------------------------- frames
    def _send_frame(self, frame: Frame, seq: int | None) -> None:
        if self._closed or not self._frames.send(frame, seq):
            return
        with self._lock:
            if self._error.startswith("preview failed"):  # resolved by this frame
                self._set_error("")

    def _send_custom(self, content: dict[str, Any], buffers: list[bytes]) -> None:
        self.send(content, buffers=buffers)

    def _on_custom_msg(self, _widget: Any, content: dict[str, Any], _buffers: list[Any]) -> None:
        self._messages.handle(content)

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

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise WidgetClosedError(_closed_text(what))


"""The widget's custom messages from the browser (docs/widget-protocol.md, JS → Python).

Each handler checks its message and queues the work on the widget's worker; a
bad message or one reaching a closed widget never raises into the comm: it
shows as the widget's ``message`` with status ``error``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..params import to_vector
from ..pins import export_pins, export_tiff
from ..preview import loss_names, numeric_params, render_preview, same_rotation
from .frames import PreviewRequest
from .records import refine_start
from .scheduler import WidgetClosedError

if TYPE_CHECKING:
    from .widget import SSBWidget

__all__ = ["Messages"]


class Messages:
    """Dispatch of one widget's custom messages by ``type``."""

    def __init__(self, widget: SSBWidget) -> None:
        self._w = widget
        self._loss: tuple[tuple[Any, ...], float] | None = None  # last preview's loss by its key
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "request_crops": self.request_crops, "save": self.save, "preview": self.preview,
            "refine": self.refine, "export_pins": self.export_pins,
            "export_tiff": self.export_tiff, "fit_map": widget._maps.fit_map,
            "cancel": widget._cancel.message, "pattern": widget._diffraction.message}

    def handle(self, content: Any) -> None:
        w = self._w
        kind = content.get("type") if isinstance(content, dict) else None
        try:
            w._check_open(f"{kind or 'message'}")
            handler = self._handlers.get(str(kind))
            if handler is not None:
                handler(content)
        except Exception as exc:  # never raise into the comm
            closed = isinstance(exc, WidgetClosedError)
            with w._lock:
                w._set_error(str(exc) if closed else f"{kind}: {type(exc).__name__}: {exc}")

    def request_crops(self, _content: dict[str, Any]) -> None:
        w = self._w
        for rid, (gen, png, shape) in list(w._crops.items()):
            w.send({"type": "crop", "id": rid, "generation": gen, "shape": shape},
                   buffers=[png])
        w._frames.resend_last()

    def save(self, content: dict[str, Any]) -> None:
        w = self._w
        path = Path(str(content.get("path") or "calibration.json"))
        w.message = f"saving calibration to {path} …"
        w._submit("save", lambda _g: w._save(path), coalesce=False)

    def preview(self, content: dict[str, Any]) -> None:
        w = self._w
        req = PreviewRequest.from_message(content)
        w._frames.received(req.seq)

        def run(_generation: int) -> None:
            s = w.session
            rotation = (s.rotation_deg if req.rotation_deg is None
                        or s.rotation_deg is None or same_rotation(req.rotation_deg, s.rotation_deg)
                        else req.rotation_deg % 360.0)
            names = loss_names(req.params)
            key = (rotation, names, tuple(to_vector(req.params, names, default=0.0)))
            # the same parameters of the loss (a view toggle, a draft's release): same loss
            known = self._loss[1] if self._loss is not None and self._loss[0] == key else None
            frame = render_preview(s, req.params, req.rotation_deg, req.view, w.max_frame_px,
                                   loss=known, draft=req.draft,
                                   bf_pixels=w._diffraction.bf_pixels())
            self._loss = (key, frame.loss)
            w._send_frame(frame, req.seq)

        w._submit("preview", run)  # latest wins: a queued older request is replaced

    def refine(self, content: dict[str, Any]) -> None:
        params = numeric_params(content.get("params"), "refine")
        locked = content.get("locked") or []
        if not isinstance(locked, list) or any(n not in params for n in locked):
            raise ValueError(f"locked must list names present in params, got {locked!r}")
        start = refine_start(params)
        self._w._start_refine(start, {n: start[n] for n in locked if n in start})

    def export_pins(self, content: dict[str, Any]) -> None:
        w = self._w
        directory = str(content.get("dir") or "pins")
        pins = content.get("pins")
        if not isinstance(pins, list):
            raise ValueError("export_pins needs pins: [{name, params, view, colormap, contrast}]")
        self._export(lambda: export_pins(w.session, directory, pins))

    def export_tiff(self, content: dict[str, Any]) -> None:
        w = self._w
        path = str(content.get("path") or "reconstruction.tif")
        params = content.get("params") or w.full_fit.get("params") or {}
        view = str(content.get("view") or "phase")
        self._export(lambda: [export_tiff(w.session, path, params, view)])

    def _export(self, write: Callable[[], list[Path]]) -> None:
        """Run ``write`` on the worker; answer ``exported`` with the files or the error."""
        w = self._w

        def run(_generation: int) -> None:
            try:
                files = [str(Path(p).resolve()) for p in write()]
            except Exception as exc:
                text = f"{type(exc).__name__}: {exc}"
                w.send({"type": "exported", "files": [], "error": text})
                with w._lock:
                    w._set_error(f"export failed: {text}")
                return
            w.send({"type": "exported", "files": files})
            with w._lock:
                if w._error.startswith("export failed"):  # resolved by this export
                    w._error = ""
                w.message = f"exported {len(files)} file(s) to {Path(files[0]).parent}"
                w._update_status()

        w._submit("export", run, coalesce=False)

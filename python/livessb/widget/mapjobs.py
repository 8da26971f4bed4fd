"""The widget's map overlay (docs/widget-protocol.md): ``fit_map`` messages run
``Session.fit_map`` on the worker, and the map (fitted or restored from a
calibration) is published as the ``map_overlays`` trait, one
``MapResult.overlay(name)`` record per parameter; the browser picks one to draw.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..params import JOINT
from .progress import IDLE, ProgressReporter

if TYPE_CHECKING:
    from ..maps import MapResult
    from .widget import SSBWidget

__all__ = ["MapJobs", "map_record", "parse_tile"]

MAP_KEY = "map"  # the worker key (latest wins) and the `_busy` entry of a running map


def parse_tile(value: Any) -> tuple[int, int]:
    """``tile`` of a ``fit_map`` message: one positive int (square) or ``[rows, cols]``."""
    items = value if isinstance(value, list | tuple) else [value, value]
    if len(items) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                                  for v in items):
        raise ValueError(f"tile must be a positive integer or [rows, cols], got {value!r}")
    return int(items[0]), int(items[1])


def map_record(m: MapResult) -> dict[str, Any]:
    """``{tile, step, grid_shape, parameters, overlays: {name: overlay}}``: the joint
    parameters first, then any opt-in ones the map holds."""
    names = [n for n in JOINT if n in m.params] + [n for n in m.names if n not in JOINT]
    return {"tile": [int(t) for t in m.tile], "step": [int(s) for s in m.step],
            "grid_shape": [int(n) for n in m.shape], "parameters": names,
            "overlays": {n: m.overlay(n) for n in names}}


class MapJobs:
    """Runs and publishes one widget's maps (the widget's worker and lock)."""

    def __init__(self, widget: SSBWidget) -> None:
        self._w = widget
        self._request: tuple[tuple[int, int], int] | None = None  # the last map asked for

    def fit_map(self, content: dict[str, Any]) -> None:
        """The ``fit_map`` message: ``{tile, trials?}`` (trials default: the widget's)."""
        w = self._w
        tile = parse_tile(content.get("tile", 64))
        trials = content.get("trials", w.trials)
        if not isinstance(trials, int) or isinstance(trials, bool) or trials < 1:
            raise ValueError(f"trials must be a positive integer, got {trials!r}")
        with w._lock:
            if MAP_KEY in w._busy and self._request == (tile, int(trials)):
                return  # the same map is queued or running (a double click, Enter + click)
            self._request = (tile, int(trials))
            w._busy.add(MAP_KEY)
            w.message = f"fitting a map of {tile[0]}×{tile[1]} tiles …"
            w._update_status()
        w._cancel.submit("map", MAP_KEY, lambda: self._run(tile, int(trials)))

    def _run(self, tile: tuple[int, int], trials: int) -> None:
        w = self._w
        report = ProgressReporter(w._set_progress)
        with w._cancel.checked(report) as progress:
            m = w.session.fit_map(tile=tile, trials=trials, seed=w.seed, progress=progress)
        self.publish(m)
        with w._lock:
            if w.message.startswith("fitting a map"):
                w.message = (f"map: {m.shape[0]}×{m.shape[1]} tiles of {tile[0]}×{tile[1]} "
                             f"in {m.timings.get('fit_s', 0.0):.1f} s")

    def publish(self, m: MapResult) -> None:
        w = self._w
        record = map_record(m)
        if w._closed:
            return
        with w._lock, w.hold_sync():
            w.map_overlays = record
            w.progress = dict(IDLE)
            w._busy.discard(MAP_KEY)
            w._update_status()

    def restore(self) -> None:
        """A map restored with the calibration (the latest one) shows without a refit."""
        maps = self._w.session.maps
        if maps:
            self._w.map_overlays = map_record(maps[-1])

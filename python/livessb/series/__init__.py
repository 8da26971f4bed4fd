"""A series of scans (a time, focal or tilt series, a day of acquisitions) fitted on a
Dask cluster: warm-started from a reference scan, drift-averaged, every result written as
it finishes (docs/series.md).

``api`` (``fit_series``) plans and collects; ``worker`` runs one scan on a worker;
``warm`` is the per-scan Session logic (reference fit, warm start); ``cluster`` starts or
joins the cluster; ``store`` and ``summary`` write the results; ``average`` registers
and averages; ``choices`` checks the caller's choices; ``cli`` is ``livessb series``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["DriftAverage", "SeriesError", "SeriesResult", "drift_corrected_average",
           "fit_series"]

if TYPE_CHECKING:
    from .api import SeriesResult, fit_series
    from .average import DriftAverage, drift_corrected_average
    from .sources import SeriesError

_HOME = {"SeriesResult": "api", "fit_series": "api", "DriftAverage": "average",
         "drift_corrected_average": "average", "SeriesError": "sources"}


def __getattr__(name: str) -> Any:
    # Lazy: `livessb --help` builds the series parser without importing Dask.
    if name in _HOME:
        import importlib

        return getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
    raise AttributeError(f"module 'livessb.series' has no attribute {name!r}")

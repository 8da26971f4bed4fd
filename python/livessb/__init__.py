"""livessb: interactive single-sideband ptychography with a resident GPU session."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__ as __version__
from .dataset import Dataset4D, DatasetError
from .fit.progress import Cancelled
from .memory import InsufficientMemoryError
from .plausible import unusual_values_allowed

__all__ = ["Cancelled", "Dataset4D", "DatasetError", "InsufficientMemoryError", "Preprocessing",
           "SSBWidget", "Session", "load", "series", "simulate", "unusual_values_allowed"]

if TYPE_CHECKING:
    from . import series, simulate
    from .io import load
    from .preprocess import Preprocessing
    from .session import Session
    from .widget import SSBWidget


def __getattr__(name: str) -> Any:
    # Lazy: importing livessb must not pull in anywidget, h5py or optuna.
    if name == "Session":
        from .session import Session
        return Session
    if name == "Preprocessing":
        from .preprocess import Preprocessing
        return Preprocessing
    if name == "SSBWidget":
        from .widget import SSBWidget
        return SSBWidget
    if name == "load":
        from .io import load
        return load
    if name in ("simulate", "series"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'livessb' has no attribute {name!r}")

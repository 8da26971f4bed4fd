"""Progress bars for the long stages (prepare, search, Newton, reconstruct): ``tqdm.auto``
(a widget in notebooks, text in a terminal), shown only for stages that last, and
saying when the first run compiles the CPU engine's Numba kernels.

Whether bars show is ambient: ``Session.fit(progress=...)`` (via :func:`with_progress`)
or :func:`progress_enabled` sets it for everything inside, the CLI's ``--quiet`` too.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar, cast

SHOW_AFTER_S = 0.5  # stages quicker than this never draw a bar

# None: bars in the main thread only (a widget's worker thread stays silent).
_ENABLED: contextvars.ContextVar[bool | None] = contextvars.ContextVar("livessb_progress",
                                                                      default=None)
F = TypeVar("F", bound=Callable[..., Any])


@contextlib.contextmanager
def progress_enabled(enabled: bool) -> Iterator[None]:
    token = _ENABLED.set(bool(enabled))
    try:
        yield
    finally:
        _ENABLED.reset(token)


def enabled() -> bool:
    flag = _ENABLED.get()
    return threading.current_thread() is threading.main_thread() if flag is None else flag


def with_progress(method: F) -> F:
    """Decorator: the call's ``progress`` argument (or its default) holds for every stage
    inside it."""
    default = inspect.signature(method).parameters["progress"].default

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with progress_enabled(bool(kwargs.get("progress", default)) and enabled()):
            return method(*args, **kwargs)
    return cast(F, wrapper)


def bar(desc: str, total: float | None = None, unit: str = "it") -> Any:
    """A tqdm.auto bar for a stage (closed by the caller or as a context manager)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, leave=False, delay=SHOW_AFTER_S,
                disable=not enabled(), file=sys.stderr)


@contextlib.contextmanager
def stage(desc: str) -> Iterator[Any]:
    """A one-step bar around a stage that reports no progress of its own."""
    if not enabled():  # no bar to show: skip tqdm's set-up (a map tile runs four stages)
        yield None
        return
    with bar(desc, total=1, unit="stage") as b:
        yield b
        b.update(1)


def staged(desc: str) -> Callable[[F], F]:
    """Decorator form of :func:`stage`."""
    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with stage(desc):
                return fn(*args, **kwargs)
        return cast(F, wrapper)
    return wrap


def _numba_cache_dirs() -> list[Path]:
    here = Path(__file__).parent / "engine" / "__pycache__"
    dirs = [here]
    if os.environ.get("NUMBA_CACHE_DIR"):
        dirs.append(Path(os.environ["NUMBA_CACHE_DIR"]))
    dirs.append(Path.home() / ".cache" / "numba")  # where numba goes when the package is read-only
    return dirs


def kernels_cached() -> bool:
    """Whether the CPU engine's Numba kernels are compiled in this process or on disk."""
    if "livessb.engine.cpu_kernels" in sys.modules:
        return True
    for d in _numba_cache_dirs():
        with contextlib.suppress(OSError):
            if d.is_dir() and any(d.rglob("cpu_kernels*.nbi")):
                return True
    return False


def compile_note(engine: Any) -> str:
    """Said on the first stage that runs the CPU kernels when they are not yet compiled."""
    if getattr(engine, "name", "") == "cpu" and not kernels_cached():
        return " (first run: compiling the Numba kernels, about a minute, once)"
    return ""


@contextlib.contextmanager
def quiet_optuna() -> Iterator[None]:
    """Optuna logs "A new study created in memory" at INFO: keep it out of notebooks."""
    logger = logging.getLogger("optuna")
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)

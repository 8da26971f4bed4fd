"""One open ``Session`` per worker, moved from scan to scan (``Session.load_scan``): the
worker pays the session's set-up (engine, device memory pool, FFT plans, the counts
buffer) once for a series of one geometry, and each scan's results are the bits a new
``Session`` on it gives. ``new_session`` is the plain one-session-per-scan opener of the
serial loop and of the in-process path."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from ..dataset import Dataset4D
from ..session import Session

# (scan, device, calibration or None) -> the session to fit it on, for a with-block
SessionOpener = Callable[[Dataset4D, str, Path | None], AbstractContextManager[Session]]


@contextmanager
def new_session(ds: Dataset4D, device: str, calibration: Path | None) -> Iterator[Session]:
    """A session of its own for one scan, closed after it."""
    with Session(ds, device=device, calibration=calibration,
                 force=calibration is not None) as s:
        yield s


class ResidentSession:
    """The worker's session: opened on its first scan, moved to each next one, closed on
    a failure (the next scan opens afresh) and when the worker shuts down."""

    def __init__(self) -> None:
        self.session: Session | None = None
        self.device = ""
        self.opened = 0  # sessions opened (1 for a series of one geometry and device)

    @contextmanager
    def __call__(self, ds: Dataset4D, device: str,
                 calibration: Path | None) -> Iterator[Session]:
        try:
            s = self.session
            if s is None or s.closed or device != self.device:
                self.close()
                s = Session(ds, device=device, calibration=calibration,
                            force=calibration is not None)
                self.session, self.device = s, device
                self.opened += 1
            else:
                s.load_scan(ds, calibration=calibration, force=calibration is not None)
            yield s
        except BaseException:
            self.close()  # a scan that failed half-way leaves no state to the next
            raise

    @property
    def scans(self) -> int:
        """Scans the current session has held (1: just opened)."""
        return 0 if self.session is None or self.session.closed else self.session.scans_loaded

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
        self.session = None

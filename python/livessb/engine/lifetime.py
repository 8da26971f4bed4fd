"""What every engine tracks for its lifetime: bound models, live spectra, closed or not."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic

from .protocol import Detachable, EngineClosedError, Spectra
from .records import PartT, PreparedSpectra, own

if TYPE_CHECKING:
    from ..dataset import Dataset4D


class Lifetime(Generic[PartT]):
    """The models bound to one engine, its live spectra (records whose part is a
    ``part_type``) and ``memo``, what was derived from the counts it holds (``Engine.scan_memo``);
    ``close`` detaches the models (breaking the engine↔model cycle explicitly) and
    releases every handle."""

    def __init__(self, part_type: type[PartT]) -> None:
        self.part_type = part_type
        self.models: list[Detachable] = []
        self.spectra: list[PreparedSpectra[PartT]] = []
        self.memo: dict[Any, Any] = {}
        self.closed = False

    def check_open(self) -> None:
        if self.closed:
            raise EngineClosedError("this engine was closed; open a new Session")

    def own(self, spectra: Spectra) -> PreparedSpectra[PartT]:
        """``spectra`` as this engine's record (a clear error for another engine's)."""
        return own(spectra, self.part_type)

    def live(self, spectra: Spectra) -> PreparedSpectra[PartT]:
        """This engine's record, the engine open and a rotation set."""
        self.check_open()
        sp = self.own(spectra)
        require_rotation(sp)
        return sp

    def forget(self, spectra: PreparedSpectra[PartT]) -> None:
        if spectra in self.spectra:
            self.spectra.remove(spectra)

    def unbind(self, release: Callable[[PreparedSpectra[PartT]], None]) -> None:
        """Detach every model and release every spectra record: what was computed on
        the counts the engine held (before new counts, or closing)."""
        for model in self.models:
            model.detach()
        self.models.clear()
        for s in list(self.spectra):
            release(s)
        self.memo.clear()

    def load(self, dataset: Dataset4D, shape: tuple[int, ...],
             release: Callable[[PreparedSpectra[PartT]], None],
             bind: Callable[[Dataset4D], None]) -> bool:
        """``Engine.load_counts`` of an engine holding counts of ``shape``: False where the
        new counts' shape differs, else unbind and ``bind`` the new dataset."""
        self.check_open()
        if tuple(dataset.counts.shape) != shape:
            return False
        self.unbind(release)
        bind(dataset)
        return True

    def close(self, release: Callable[[PreparedSpectra[PartT]], None]) -> None:
        self.unbind(release)
        self.closed = True


def require_rotation(spectra: Spectra) -> None:
    if spectra.rotation is None:
        raise RuntimeError("set_rotation() must be called on these spectra first")

"""ThickSampleModel: the fit's view of one prepared scan window on an engine.

The model holds the engine and its spectra; the engine lists its models so it
can release them on close. That engine↔model cycle is broken explicitly by
``detach`` (called from ``Engine.close``), never by a global ``gc.collect()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..engine.protocol import Engine
from ..params import JOINT
from ..physics.objective import MisfitTerms
from ..progress import stage
from ..results import Bounds


class ModelDetachedError(RuntimeError):
    """The model's engine was closed."""


class ThickSampleModel:
    def __init__(self, engine: Engine, bounds: Bounds | None, theta: float,
                 transpose: bool, apodise: bool | None = None) -> None:
        """``apodise``: as ``Engine.prepare`` (None: the engine's ``scan_window``; False
        for a model that reconstructs)."""
        self.engine: Engine | None = engine
        with stage("prepare spectra"):
            self.spectra: Any = engine.prepare(bounds, apodise)
            engine.set_rotation(self.spectra, theta, transpose)
        engine.models.append(self)

    @property
    def bounds(self) -> Bounds:
        self._live()
        return self.spectra.bounds

    @property
    def alias_pixels(self) -> str:
        """Which pairs the engine's fit uses (``physics.aliases``)."""
        return self._live().alias_pixels

    def _live(self) -> Engine:
        if self.engine is None:
            raise ModelDetachedError("this model's session was closed; open a new Session")
        return self.engine

    def set_rotation(self, theta: float, transpose: bool) -> None:
        self._live().set_rotation(self.spectra, theta, transpose)

    def evaluate(
        self, candidates: np.ndarray, objective: str = "vp", names: tuple[str, ...] = JOINT
    ) -> np.ndarray:
        return self._live().evaluate(self.spectra, candidates, objective, names)

    def evaluate_rotations(
        self, thetas: np.ndarray, transpose: bool, candidate: np.ndarray,
        names: tuple[str, ...] = JOINT,
    ) -> np.ndarray:
        return self._live().evaluate_rotations(self.spectra, thetas, transpose,
                                               candidate, names)

    def derivatives(
        self, candidates: np.ndarray, names: tuple[str, ...] = JOINT
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self._live().derivatives(self.spectra, candidates, names)

    def misfit_terms(self, candidate: np.ndarray,
                     names: tuple[str, ...] = JOINT) -> MisfitTerms:
        return self._live().misfit_terms(self.spectra, candidate, names)

    def reconstruct(self, params: dict[str, float], upsample: int, method: str,
                    resident: bool = False, bf_pixels: int | None = None,
                    crop: Bounds | None = None) -> Any:
        return self._live().reconstruct(self.spectra, params, upsample, method, resident,
                                        bf_pixels, crop)

    def reconstruct_many(self, params: Sequence[dict[str, float]], upsample: int,
                         method: str) -> list[Any]:
        return self._live().reconstruct_many(self.spectra, params, upsample, method)

    def release(self) -> None:
        """Free this model's spectra now (e.g. a region replaced by a newer edit)."""
        if self.engine is not None:
            self.engine.release(self.spectra)
            if self in self.engine.models:
                self.engine.models.remove(self)
        self.detach()

    def detach(self) -> None:
        self.engine = None
        self.spectra = None

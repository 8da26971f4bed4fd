"""The Engine protocol: what a session needs from a compute backend.

An engine is bound to one dataset: counts stay resident (native dtype) from
construction until ``close``. Spectra are prepared per scan window (the full
field or a padded region) into ``Spectra`` handles; a rotation is applied to
a handle; then candidate batches are scored, differentiated and reconstructed.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from ..results import Bounds


class EngineClosedError(RuntimeError):
    """The engine was closed; its device memory has been released."""


class DeviceMemoryError(MemoryError):
    """The device ran out of memory; the message names the size and the options."""


class Spectra(Protocol):
    """Prepared half-plane spectra of one scan window (engine-owned arrays)."""

    shape: tuple[int, int]  # padded scan shape the spectra were taken over
    bounds: Bounds  # measured positions it covers, in full-scan pixels
    n_bf: int


class Engine(Protocol):
    name: str  # "cpu" | "cuda"
    evaluations: int  # candidate evaluations so far (loss or derivatives)

    def prepare(self, bounds: Bounds | None = None) -> Spectra:
        """Half-plane spectra of the full field (None) or a region padded with its mean pattern."""

    def set_rotation(self, spectra: Spectra, theta: float, transpose: bool) -> None:
        """Scan-frame BF frequencies, trotter support and sideband energy for this rotation."""

    def evaluate(
        self, spectra: Spectra, candidates: np.ndarray, objective: str = "vp",
        names: tuple[str, ...] = ...,
    ) -> np.ndarray:
        """Losses of a (K, P) batch of parameter vectors named ``names`` (default the six
        joint parameters), in one call: (K,)."""

    def evaluate_rotations(
        self, spectra: Spectra, thetas: np.ndarray, transpose: bool, candidate: np.ndarray,
        names: tuple[str, ...] = ...,
    ) -> np.ndarray:
        """VP loss of one parameter vector named ``names`` at each rotation θ (energies
        per θ): (R,). The spectra's rotation afterwards is unspecified: set the one you
        want."""

    def derivatives(
        self, spectra: Spectra, candidates: np.ndarray, names: tuple[str, ...] = ...,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Exact VP loss (K,), gradient (K, P) and Hessian (K, P, P) of a batch."""

    def reconstruct(
        self, spectra: Spectra, params: dict[str, float], upsample: int, method: str
    ) -> np.ndarray:
        """Complex object on the (f·Nr, f·Nc) grid, complex64, on the host."""

    def release(self, spectra: Spectra) -> None:
        """Drop a handle's arrays (regions are re-prepared on every edit)."""

    def memory_info(self) -> dict[str, Any]:
        """Live bytes held by the engine (and the device pool where there is one)."""

    def close(self) -> None:
        """Release every array and return pooled device memory; idempotent."""

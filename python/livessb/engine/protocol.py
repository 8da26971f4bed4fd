"""The Engine protocol: what a session, its models and the benchmark need from a backend.

An engine is bound to one dataset at a time: counts stay resident (native dtype) from
construction (or ``load_counts``, the next scan of a series) until ``close``. Spectra
are prepared per scan window (the full field or a padded region) into ``Spectra``
handles; a rotation is applied to a handle; then candidate batches are scored,
differentiated and reconstructed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..params import JOINT
from ..physics.objective import MisfitTerms
from ..results import Bounds

if TYPE_CHECKING:
    from ..dataset import Dataset4D


class EngineClosedError(RuntimeError):
    """The engine was closed; its device memory has been released."""


class DeviceMemoryError(MemoryError):
    """The device ran out of memory; the message names the size and the options."""


class Spectra(Protocol):
    """Prepared half-plane spectra of one scan window (engine-owned arrays)."""

    shape: tuple[int, int]  # padded scan shape the spectra were taken over
    bounds: Bounds  # measured positions it covers, in full-scan pixels
    n_bf: int
    energy: float  # sideband energy at the current rotation
    rotation: tuple[float, bool] | None  # (θ rad, transpose) last set, None before
    G: Any  # (B, M) complex spectra, BF pixels × flattened half plane, engine array module


class Detachable(Protocol):
    """What an engine keeps of the models bound to it: it detaches them on close."""

    def detach(self) -> None: ...


class Engine(Protocol):
    name: str  # "cpu" | "cuda"
    alias_pixels: str  # physics.aliases.ALIAS_PIXELS: the fit's pairs on an undersampled scan
    scan_window: str  # physics.apodisation.SCAN_WINDOWS: the fit's spectra apodised or not
    evaluations: int  # candidate evaluations so far (loss or derivatives)
    spikes_repaired: int  # one-frame spikes replaced in the BF counts (engine.spikes)
    models: list[Detachable]  # models bound to this engine (the engine↔model cycle)
    # values derived from the resident counts alone (crystal mode's first lattice), kept
    # by callers across fits; emptied when the counts go (load_counts, close)
    scan_memo: dict[Any, Any]
    # The NumPy/CuPy reference operations over this engine's geometry and array module
    # (engine.reference.Reference); fit.robust reads the spectra ``G`` through it.
    reference: Any

    @property
    def closed(self) -> bool: ...

    @property
    def n_bf(self) -> int:
        """BF pixels the engine scores (the dataset's BF disk)."""

    def bf_center_of_mass(self) -> np.ndarray:
        """COM of each pattern over the BF pixels, detector px from the BF centre: (Rr, Rc, 2)."""

    def prepare(self, bounds: Bounds | None = None, apodise: bool | None = None) -> Spectra:
        """Half-plane spectra of the full field (None) or a region padded with its mean
        pattern; ``apodise`` (None: the engine's ``scan_window``) of the Hann-weighted
        window (physics.apodisation), for fits only."""

    def set_rotation(self, spectra: Spectra, theta: float, transpose: bool) -> None:
        """Scan-frame BF frequencies, trotter support and sideband energy for this rotation."""

    def evaluate(
        self, spectra: Spectra, candidates: np.ndarray, objective: str = "vp",
        names: tuple[str, ...] = JOINT,
    ) -> np.ndarray:
        """Losses of a (K, P) batch of parameter vectors named ``names`` (default the six
        joint parameters), in one call: (K,)."""

    def evaluate_rotations(
        self, spectra: Spectra, thetas: np.ndarray, transpose: bool, candidate: np.ndarray,
        names: tuple[str, ...] = JOINT,
    ) -> np.ndarray:
        """VP loss of one parameter vector named ``names`` at each rotation θ: (R,).

        For the six joint parameters the kernels hold every trotter lobe's pixel set, and
        the sideband energy, at the grid's middle rotation θ₀ = thetas[R // 2] while the
        phases follow θ: pixels that would switch lobes as θ moves carry their own noise,
        which made L(θ) step the same way for every seed and biased the refined θ on
        small detectors. At θ₀ the loss is ``evaluate``'s. Opted-in coefficients run
        set_rotation + evaluate per θ. The spectra's rotation afterwards is unspecified:
        set the one you want."""

    def derivatives(
        self, spectra: Spectra, candidates: np.ndarray, names: tuple[str, ...] = JOINT,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Exact VP loss (K,), gradient (K, P) and Hessian (K, P, P) of a batch."""

    def misfit_terms(
        self, spectra: Spectra, candidate: np.ndarray, names: tuple[str, ...] = JOINT,
    ) -> MisfitTerms:
        """What a fit's errors need at one parameter vector, from ONE derivatives call
        (``physics.objective.MisfitTerms``, float64 on the host): ∂L_ν/∂θ of every stored
        frequency ν (both trotter lobes added), (P, M), summing over ν to
        ``derivatives``' gradient (the misfit errors' clusters, fit/robust); the exact
        Hessian (P, P), the same bits as ``derivatives``'; each frequency's explained
        energy and C10 curvature (the frequency bands of the systematic errors,
        fit/systematic)."""

    def reconstruct(
        self, spectra: Spectra, params: dict[str, float], upsample: int = 1,
        method: str = "ssb", resident: bool = False, bf_pixels: int | None = None,
        crop: Bounds | None = None,
    ) -> Any:
        """Complex object on the (f·Nr, f·Nc) grid, complex64, on the host (``resident``:
        left in the engine's array module, a device array on CUDA: what a map's blend adds
        up before its one download). ``bf_pixels``: only that many BF pixels, the nearest
        the disk centre (``physics.geometry.nearest_bf_pixels``), enter the sums and their
        normalisation; None: all (a count equal to all: the same bits). ``crop``: (row
        start, stop, col start, stop) of the output grid, only that part of the image,
        cut before it leaves the engine (a region's crop: its bytes alone cross)."""

    def reconstruct_many(self, spectra: Spectra, params: Sequence[dict[str, float]],
                         upsample: int = 1, method: str = "ssb") -> list[Any]:
        """``reconstruct(spectra, p, upsample, method, resident=True)`` of each ``p``, in
        order and with the same images: a map's tiles. The CUDA engine reconstructs up
        to four per launch (the walk and the spectra loads shared)."""

    def release(self, spectra: Spectra) -> None:
        """Drop a handle's arrays (regions are re-prepared on every edit)."""

    # -- diagnostics (benchmarks and tests read these, never private state) -----------
    def memory_info(self) -> dict[str, Any]:
        """Live bytes held by the engine (and the device pool where there is one)."""

    def live_spectra(self) -> tuple[Spectra, ...]:
        """The handles prepared and not yet released, in preparation order."""

    def spectra_info(self, spectra: Spectra) -> dict[str, int]:
        """Sizes of one handle: BF pixels, half-plane frequencies, in-trotter (b, ν) pairs
        at its rotation (0 before one is set) and the bytes of its spectra."""

    def stage_timings(self) -> dict[str, float]:
        """Cumulative seconds, calls and candidates per engine stage (a copy; empty where
        the engine does not time its stages)."""

    def close_timings(self) -> dict[str, float]:
        """Seconds the last ``close`` spent per step (empty before one, or untimed)."""

    def upload_bf_counts(self, counts: Any) -> Any:
        """The BF pixels of ``counts`` gathered as the engine holds them resident (a new
        array; the resident one is kept): what opening a session costs, for timing."""

    def resident_bf_counts(self) -> Any:
        """The resident BF counts in the engine's array module and layout (CPU: scan rows,
        scan cols, BF pixels; CUDA: BF pixels, scan rows, scan cols)."""

    def load_counts(self, dataset: Dataset4D) -> bool:
        """Hold the next scan's counts instead of these, keeping what set-up paid for
        (compiled kernels, the device pool, FFT plans, buffers of the same shape): models
        are detached and spectra released as on ``close``, results as a new engine on
        ``dataset`` gives. False (nothing changed) where the counts' shape differs: open
        a new engine then."""

    def close(self) -> None:
        """Release every array and return pooled device memory; idempotent."""

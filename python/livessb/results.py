"""Result records returned by Session: fits, reconstructions, regions.

Results live on the host (NumPy) and own their data, so they stay valid after
the session that made them is closed.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .reprs import Pretty

if TYPE_CHECKING:
    import optuna

Bounds = tuple[int, int, int, int]


@dataclass(repr=False)  # reprs.Pretty: concise repr, notebook table
class FitResult(Pretty):
    """A joint fit: parameters, loss, geometry, and the full search record."""

    params: dict[str, float]
    loss: float
    rotation_deg: float
    transpose: bool
    trials: list[dict[str, Any]] = field(default_factory=list)
    newton: list[dict[str, Any]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    on_box_edge: list[str] = field(default_factory=list)
    branches: list[dict[str, Any]] = field(default_factory=list)
    bounds: Bounds | None = None
    # 1-σ standard errors, same keys as params (fit.errors; 0.0 for a parameter held
    # fixed by the user or by the thin-model choice). Empty for the comparison
    # objectives, which are not least squares. Files written before load with {} / [].
    errors: dict[str, float] = field(default_factory=dict)
    # Parameters the data do not determine (fit.model_choice), in params order.
    undetermined: list[str] = field(default_factory=list)
    # The systematic part of ``errors`` (same keys; fit.systematic): the spread of the
    # low and high scan frequencies' estimates beyond their noise, 0 where they agree.
    # Files written before it load with {}.
    errors_systematic: dict[str, float] = field(default_factory=dict)
    # Crystal mode's record (fit.lattice; {} for the per-bin model): the lattice found,
    # the per-bin fit it refined, the noise level and the lobes' separate estimates.
    lattice: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["bounds"] = list(self.bounds) if self.bounds is not None else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FitResult:
        d = dict(d)
        if d.get("bounds") is not None:
            d["bounds"] = tuple(int(b) for b in d["bounds"])
        return cls(**d)

    def study(self, name: str = "livessb") -> optuna.Study:
        """The search trials as an in-memory Optuna study (for inspection and plots)."""
        import optuna
        from optuna.distributions import BaseDistribution, FloatDistribution

        from .progress import quiet_optuna

        box = self.provenance.get("box", {})
        dists: dict[str, BaseDistribution] = {
            k: FloatDistribution(float(lo), float(hi)) for k, (lo, hi) in box.items()}
        with quiet_optuna():  # no "A new study created in memory" log line
            study = optuna.create_study(study_name=name, direction="minimize")
        trials = []
        for t in self.trials:
            params = {k: float(np.clip(t["params"][k], lo, hi)) for k, (lo, hi) in box.items()}
            trials.append(optuna.trial.create_trial(
                params=params, distributions=dists, value=float(t["loss"]),
                user_attrs={"batch": t.get("batch", 0), "branch": t.get("branch", 0)}))
        study.add_trials(trials)
        return study


@dataclass(repr=False)  # reprs.Pretty: concise repr, notebook table
class Reconstruction(Pretty):
    """Complex object on the output grid; phase in rad."""

    object: np.ndarray
    params: dict[str, float]
    upsample: int
    sampling_A: tuple[float, float]
    method: str = "ssb"
    origin_px: tuple[int, int] = (0, 0)
    bf_pixels: int | None = None  # BF pixels summed (the nearest the disk centre); None: all

    @property
    def phase(self) -> np.ndarray:
        return np.angle(self.object).astype(np.float32)

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.object.shape[0]), int(self.object.shape[1]))

    def crop(self, bounds: Bounds) -> Reconstruction:
        """Crop to scan-pixel bounds (row_start, row_stop, col_start, col_stop) × upsample."""
        f = self.upsample
        r0, r1, c0, c1 = bounds
        return Reconstruction(
            object=np.ascontiguousarray(self.object[r0 * f:r1 * f, c0 * f:c1 * f]),
            params=dict(self.params), upsample=f, sampling_A=self.sampling_A,
            method=self.method, origin_px=(r0 * f, c0 * f), bf_pixels=self.bf_pixels)

    def phase_hash(self) -> str:
        return hashlib.sha256(np.ascontiguousarray(self.phase).tobytes()).hexdigest()

    def save(self, path: str | Path, **options: Any) -> Path:
        """Write the phase (``what="phase"``), amplitude or complex object; the format
        follows the suffix: .npy, 32-bit ImageJ .tif(f), .png, or EMD 1.0 .emd/.h5/.hdf5
        (py4DSTEM and HyperSpy open it). See ``livessb.export.save_reconstruction``."""
        from .export import save_reconstruction

        return save_reconstruction(self, path, **options)

    def plot(self, **options: Any) -> Any:
        from .plots import plot_phase

        return plot_phase(self, **options)


@dataclass(repr=False)  # reprs.Pretty: concise repr, notebook table
class RegionResult(Pretty):
    """A region's joint fit and the crop of the full-scan reconstruction made with it."""

    id: str
    bounds: Bounds
    fit: FitResult
    crop: Reconstruction
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def params(self) -> dict[str, float]:
        return self.fit.params

    @property
    def phase(self) -> np.ndarray:
        return self.crop.phase

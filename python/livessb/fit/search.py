"""Seeded batched proposals over the parameter box, and the trial record.

Batch 1 is a scrambled Halton set (space filling); later batches sample around
the best trials so far with a shrinking spread (a cross-entropy style refine).
Every batch is scored in one engine call. Proposals depend only on the seed and
the losses seen, so the same data and seed give the same record.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import qmc

from ..params import DEFAULT_BOX, JOINT, MIRROR_SIGN, NON_NEGATIVE, PERIODS

ELITES = 8
SPREAD_START = 0.12  # in unit-cube coordinates
SPREAD_SHRINK = 0.6


@dataclass(frozen=True)
class Box:
    low: np.ndarray
    high: np.ndarray
    names: tuple[str, ...] = JOINT

    @classmethod
    def from_mapping(
        cls, box: Mapping[str, tuple[float, float]] | None, names: tuple[str, ...] = JOINT
    ) -> Box:
        merged = {n: DEFAULT_BOX[n] for n in names}
        for key, value in (box or {}).items():
            if key not in merged:
                hint = " (opt it in with extra=...)" if key in DEFAULT_BOX else ""
                raise ValueError(f"unknown fit parameter {key!r} in box{hint}: use {list(names)}")
            lo, hi = (float(x) for x in value)
            if not hi > lo:
                raise ValueError(f"box for {key} must have low < high, got {value!r}")
            merged[key] = (lo, hi)
        negative = [n for n in NON_NEGATIVE if n in merged and merged[n][0] < 0]
        if negative:
            raise ValueError(f"{negative} are non-negative: their box must start at ≥ 0")
        return cls(low=np.array([merged[p][0] for p in names]),
                   high=np.array([merged[p][1] for p in names]), names=tuple(names))

    def to_dict(self) -> dict[str, list[float]]:
        return {p: [float(lo), float(hi)]
                for p, lo, hi in zip(self.names, self.low, self.high, strict=True)}

    def from_unit(self, u: np.ndarray) -> np.ndarray:
        return self.low + u * (self.high - self.low)

    def to_unit(self, v: np.ndarray) -> np.ndarray:
        return (v - self.low) / (self.high - self.low)

    def full_period(self, name: str) -> bool:
        """Whether the box spans a whole period of angle ``name`` (so it wraps, not clips)."""
        i = self.names.index(name)
        return name in PERIODS and self.high[i] - self.low[i] >= PERIODS[name] - 1e-12

    def wrap(self, name: str, value: float) -> float:
        """Angle ``name`` wrapped into the box when the box spans a whole period."""
        if not self.full_period(name):
            return value
        low = self.low[self.names.index(name)]
        return float(low + np.mod(value - low, PERIODS[name]))


# Under θ → θ+π the loss is invariant when every C_nm with even m and the tilt change
# sign (C12's sign change is phi12 + π/2); odd-m coefficients (C21, C23) are unchanged:
# MIRROR_SIGN in the parameter table.


def mirror_params(params: Mapping[str, float], box: Box) -> dict[str, float]:
    """The θ+π mirror of ``params``: same loss on the other rotation branch."""
    out = {name: MIRROR_SIGN.get(name, 1.0) * float(v) for name, v in params.items()}
    if "phi12" in out:  # C12 → -C12 is phi12 + π/2
        out["phi12"] += PERIODS["phi12"] / 2
        if "phi12" in box.names:
            out["phi12"] = box.wrap("phi12", out["phi12"])
    return out


def mirror_in_box(params: Mapping[str, float], box: Box) -> bool:
    """Whether the θ+π mirror of ``params`` (same loss on the other branch) is in the box."""
    mirrored = mirror_params(params, box)
    return all(box.low[i] - 1e-9 <= mirrored[name] <= box.high[i] + 1e-9
               for i, name in enumerate(box.names))


def box_is_mirror_symmetric(box: Box) -> bool:
    """Whether the θ+π mirror maps the box onto itself: then the other branch's search
    is this branch's search mirrored, and its optimum is this branch's optimum mirrored."""
    for i, name in enumerate(box.names):
        if name in MIRROR_SIGN and not math.isclose(box.low[i], -box.high[i], rel_tol=1e-12,
                                                    abs_tol=1e-12):
            return False
        if name == "phi12" and not box.full_period(name):
            return False
    return True


def batch_sizes(trials: int) -> list[int]:
    """Half space filling, the rest in four adaptive batches."""
    if trials < 1:
        raise ValueError(f"trials must be ≥ 1, got {trials}")
    first = max(1, trials // 2)
    rest = trials - first
    n_adaptive = min(4, rest)
    sizes = [first] + [rest // n_adaptive + (1 if i < rest % n_adaptive else 0)
                       for i in range(n_adaptive)] if rest else [first]
    return sizes


def _adaptive_batch(
    rng: np.random.Generator, unit: np.ndarray, losses: np.ndarray, n: int, spread: float,
    box: Box,
) -> np.ndarray:
    order = np.argsort(losses, kind="stable")[:ELITES]
    ranks = np.arange(len(order))
    weights = np.exp(-ranks / 3.0)
    picks = rng.choice(order, size=n, p=weights / weights.sum())
    out = unit[picks] + rng.normal(scale=spread, size=(n, unit.shape[1]))
    for i, name in enumerate(box.names):
        if box.full_period(name):
            out[:, i] = np.mod(out[:, i], 1.0)  # periodic: wrap instead of clip
    return np.clip(out, 0.0, 1.0)


# The first batch of a seed: scrambled Halton points (unit cube) and the generator's
# state after drawing them. Every tile of a map and every region asks for the same
# (dimensions, seed, size): building the scrambling costs ~1.5 ms a fit.
_FIRST_BATCH: dict[tuple[int, int, int], tuple[np.ndarray, dict[str, Any]]] = {}
_FIRST_BATCH_KEPT = 32


def _first_batch(rng: np.random.Generator, d: int, seed: int, n: int) -> np.ndarray:
    """``n`` scrambled Halton points of ``rng`` (seeded ``seed``), ``rng`` left as if it
    had drawn them."""
    key = (d, seed, n)
    if key not in _FIRST_BATCH:
        points = qmc.Halton(d=d, scramble=True, seed=rng).random(n)
        while len(_FIRST_BATCH) >= _FIRST_BATCH_KEPT:
            _FIRST_BATCH.pop(next(iter(_FIRST_BATCH)))
        _FIRST_BATCH[key] = (points, copy.deepcopy(dict(rng.bit_generator.state)))
    points, state = _FIRST_BATCH[key]
    rng.bit_generator.state = copy.deepcopy(state)
    return points.copy()


class NativeProposer:
    """Scrambled Halton batch first, then Gaussian batches around the elites (unit cube)."""

    def __init__(self, box: Box, trials: int, seed: int) -> None:
        self.box = box
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def propose(self, batch: int, n: int, params: np.ndarray, losses: np.ndarray) -> np.ndarray:
        if batch == 0:
            return self.box.from_unit(_first_batch(self.rng, len(self.box.names), self.seed,
                                                   n))
        unit = _adaptive_batch(self.rng, self.box.to_unit(params), losses, n,
                               SPREAD_START * SPREAD_SHRINK ** (batch - 1), self.box)
        return self.box.from_unit(unit)

    def tell(self, values: np.ndarray) -> None:
        """Stateless beyond the history passed to ``propose``."""


class OptunaProposer:
    """Optuna's seeded multivariate TPE, asked a whole batch at a time (constant liar).

    A TPE ask costs milliseconds once trials accumulate, so this is the slower option;
    each batch still goes to the engine in one call.
    """

    def __init__(self, box: Box, trials: int, seed: int) -> None:
        import optuna
        from optuna.distributions import BaseDistribution, FloatDistribution

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.dists: dict[str, BaseDistribution] = {
            p: FloatDistribution(float(lo), float(hi))
            for p, lo, hi in zip(box.names, box.low, box.high, strict=True)}
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=max(1, trials // 2),
                                             multivariate=True, constant_liar=True)
        self.study = optuna.create_study(direction="minimize", sampler=sampler)
        self.asked: list[Any] = []
        self.names = box.names

    def propose(self, batch: int, n: int, params: np.ndarray, losses: np.ndarray) -> np.ndarray:
        self.asked = [self.study.ask(self.dists) for _ in range(n)]
        return np.array([[t.params[p] for p in self.names] for t in self.asked])

    def tell(self, values: np.ndarray) -> None:
        for t, v in zip(self.asked, values, strict=True):
            self.study.tell(t, float(v))


SAMPLERS: dict[str, type[NativeProposer] | type[OptunaProposer]] = {
    "native": NativeProposer, "optuna": OptunaProposer}


def search(
    score: Callable[[np.ndarray], np.ndarray],
    box: Box,
    trials: int,
    seed: int,
    on_batch: Callable[[int], Any] | None = None,
    sampler: str = "native",
) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Propose and score ``trials`` candidates batch by batch, one engine call per batch.

    Returns (params (T, 6), losses (T,), batch id of each trial).
    """
    if sampler not in SAMPLERS:
        raise ValueError(f"unknown sampler {sampler!r}: use {sorted(SAMPLERS)}")
    proposer = SAMPLERS[sampler](box, trials, seed)
    params = np.empty((0, len(box.names)))
    losses = np.empty(0)
    batch_of: list[int] = []
    for b, n in enumerate(batch_sizes(trials)):
        proposed = proposer.propose(b, n, params, losses)
        values = np.asarray(score(proposed), dtype=np.float64)
        proposer.tell(values)
        params = np.concatenate([params, proposed])
        losses = np.concatenate([losses, values])
        batch_of += [b] * n
        if on_batch is not None:
            on_batch(n)
    return params, losses, batch_of


def best_distinct(
    params: np.ndarray, losses: np.ndarray, box: Box, count: int, min_distance: float = 0.05
) -> list[int]:
    """Indices of the ``count`` best trials at least ``min_distance`` apart in the unit cube."""
    unit = box.to_unit(params)
    chosen: list[int] = []
    for i in np.argsort(losses, kind="stable"):
        if all(np.linalg.norm(unit[i] - unit[j]) >= min_distance for j in chosen):
            chosen.append(int(i))
        if len(chosen) == count:
            break
    return chosen


def trial_record(
    params: np.ndarray, losses: np.ndarray, batch_of: list[int], branch: int, offset: int = 0,
    names: tuple[str, ...] = JOINT,
) -> list[dict[str, Any]]:
    rows, values = np.asarray(params, dtype=np.float64).tolist(), losses.tolist()
    return [
        {"number": offset + i, "batch": int(batch_of[i]), "branch": branch,
         "params": dict(zip(names, rows[i], strict=True)), "loss": float(values[i])}
        for i in range(len(values))
    ]

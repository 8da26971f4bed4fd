"""Held parameters: the fit searches and refines the free ones, engines see full vectors.

The fast kernels need the six joint parameters by name, so a fit with ``fixed``
values still sends every engine call the full vector (fixed values filled in) and
reads back the free part of the gradient and Hessian.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..params import FITTABLE, NON_NEGATIVE, OPTIONAL, fit_names
from .model import ThickSampleModel
from .search import Box


def check_fixed(
    fixed: Mapping[str, float] | None, names: tuple[str, ...],
    box: Mapping[str, tuple[float, float]] | None = None,
) -> dict[str, float]:
    """``fixed`` as floats in ``names`` order, or a ValueError naming the problem."""
    if not fixed:
        return {}
    if not isinstance(fixed, Mapping):
        raise ValueError(f"fixed must map parameter names to values, got {fixed!r}")
    unknown = [k for k in fixed if k not in names]
    if unknown:
        raise ValueError(f"cannot hold {unknown} fixed: fit parameters are {list(names)} "
                         "(opt C21, C23 or C30 in with extra=... to hold those)")
    out: dict[str, float] = {}
    for name in names:
        if name not in fixed:
            continue
        try:
            value = float(fixed[name])
        except (TypeError, ValueError):
            raise ValueError(f"fixed[{name!r}] must be a number, got {fixed[name]!r}") from None
        if not math.isfinite(value):
            raise ValueError(f"fixed[{name!r}] must be finite, got {value!r}")
        if name in NON_NEGATIVE and value < 0:
            raise ValueError(f"fixed[{name!r}] = {value!r}: {name} is non-negative; hold it "
                             "at a value ≥ 0")
        out[name] = value
    both = sorted(set(out) & set(box or {}))
    if both:
        raise ValueError(f"{both} are both fixed and given a search box: drop one of the two")
    if len(out) == len(names):
        raise ValueError("every fit parameter is fixed: nothing left to fit; use "
                         "Session.reconstruct(params) or Session.loss_evaluator() instead")
    return out


def free_names(names: tuple[str, ...], fixed: Mapping[str, float]) -> tuple[str, ...]:
    return tuple(n for n in names if n not in fixed)


def refine_start(
    params: Mapping[str, float], fixed: Mapping[str, float] | None,
) -> tuple[Box, dict[str, float], dict[str, float]]:
    """Box of the free parameters, the held values and the start, checked."""
    extra = [key for key, names in OPTIONAL.items() if any(n in params for n in names)]
    names = fit_names(extra)
    unknown = [k for k in params if k not in names]
    if unknown:
        raise ValueError(f"cannot refine {unknown}: fit parameters are {list(names)} "
                         "(reconstruction-only coefficients are not fitted)")
    held = check_fixed(fixed, names)
    fit_box = Box.from_mapping(None, free_names(names, held))
    missing = [n for n in fit_box.names if n not in params]
    if missing:
        raise ValueError(f"refine needs a start value for {missing} (or hold them in "
                         "fixed=...)")
    start = {n: float(params[n]) for n in fit_box.names}
    outside = [f"{n}={v!r} not in [{lo}, {hi}]" for n, v, lo, hi
               in zip(fit_box.names, start.values(), fit_box.low, fit_box.high, strict=True)
               if not lo <= v <= hi]
    if outside:
        raise ValueError(f"refine start outside the default box: {outside}; run fit() "
                         "with a wider box instead")
    return fit_box, held, start


class FreeView:
    """A model seen through the free parameters of ``box`` with ``fixed`` held.

    With nothing fixed every call passes straight through, so results are the
    model's own bit for bit.
    """

    def __init__(self, model: ThickSampleModel, box: Box,
                 fixed: Mapping[str, float] | None = None) -> None:
        self.model = model
        self.fixed = dict(fixed or {})
        self.free = box.names
        # Engine order: the table's (JOINT first, then opted-in coefficients).
        self.names = box.names if not self.fixed else tuple(
            p.name for p in FITTABLE if p.name in self.free or p.name in self.fixed)
        self.free_index = np.array([self.names.index(n) for n in self.free], dtype=np.int64)

    def expand(self, candidates: np.ndarray) -> np.ndarray:
        """(K, free) → (K, all) with the fixed values filled in."""
        if not self.fixed:
            return candidates
        c = np.asarray(candidates, dtype=np.float64)
        full = np.empty((len(c), len(self.names)), dtype=np.float64)
        for i, name in enumerate(self.names):
            full[:, i] = self.fixed[name] if name in self.fixed else 0.0
        full[:, self.free_index] = c
        return full

    def params(self, vector: np.ndarray) -> dict[str, float]:
        """Full parameter dict of one free vector (fixed values exactly as given)."""
        free = {n: float(v) for n, v in zip(self.free, vector, strict=True)}
        if not self.fixed:
            return free
        return {n: self.fixed[n] if n in self.fixed else free[n] for n in self.names}

    def full_params(self, params: Mapping[str, float]) -> dict[str, float]:
        """A free-parameter dict completed with the fixed values, in engine order."""
        if not self.fixed:
            return dict(params)
        return {n: self.fixed[n] if n in self.fixed else float(params[n]) for n in self.names}

    def set_rotation(self, theta: float, transpose: bool) -> None:
        self.model.set_rotation(theta, transpose)

    def evaluate(self, candidates: np.ndarray, objective: str = "vp") -> np.ndarray:
        return self.model.evaluate(self.expand(candidates), objective, self.names)

    def evaluate_rotations(self, thetas: np.ndarray, transpose: bool,
                           candidate: np.ndarray) -> np.ndarray:
        return self.model.evaluate_rotations(thetas, transpose, self.expand(candidate),
                                             self.names)

    def derivatives(self, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        loss, grad, hess = self.model.derivatives(self.expand(candidates), self.names)
        if not self.fixed:
            return loss, grad, hess
        i = self.free_index
        return loss, grad[:, i], hess[:, i][:, :, i]

    def reconstruct(self, params: dict[str, float], upsample: int, method: str) -> Any:
        return self.model.reconstruct(params, upsample, method)

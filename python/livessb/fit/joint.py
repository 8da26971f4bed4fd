"""Joint fit (the six parameters, plus any opted-in coefficients): seeded batched search,
then Newton from the best few."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ..physics.overlap import PARAMS
from ..progress import compile_note
from .model import ThickSampleModel
from .newton import NewtonOptions, newton_refine
from .search import NON_NEGATIVE, PERIODS, Box, best_distinct, search, trial_record

EDGE_TOLERANCE = 1e-3  # fraction of the box width
ROTATION_GRID = 25  # θ samples over ±3° around the COM estimate


@dataclass
class BranchFit:
    params: dict[str, float]
    loss: float
    trials: list[dict[str, Any]]
    newton: list[dict[str, Any]]
    on_box_edge: list[str]
    timings: dict[str, float] = field(default_factory=dict)
    derived: str | None = None  # how a fit that ran no search of its own was obtained


def joint_fit(
    model: ThickSampleModel,
    trials: int,
    seed: int,
    box: Box,
    objective: str = "vp",
    n_starts: int = 3,
    branch: int = 0,
    progress: bool = False,
    label: str = "fit",
    sampler: str = "native",
) -> BranchFit:
    """Search ``trials`` seeded candidates in ``box`` (its names are the fit parameters),
    then refine the best ``n_starts`` with Newton."""
    b, names = box, box.names
    t0 = time.perf_counter()
    with tqdm(total=trials, desc=label + compile_note(model.engine), disable=not progress,
              leave=False) as bar:
        params, losses, batch_of = search(lambda c: model.evaluate(c, objective, names), b,
                                          trials, seed, on_batch=bar.update, sampler=sampler)
    t1 = time.perf_counter()
    starts = params[best_distinct(params, losses, b, n_starts)]
    newton: list[dict[str, Any]] = []
    if objective == "vp":
        x, lx, newton = newton_refine(starts, lambda c: model.derivatives(c, names), b,
                                      NewtonOptions())
        best = int(np.argmin(lx))
        vec, loss = x[best], float(lx[best])
    else:  # the comparison objectives have no derivatives: keep the best trial
        best = int(np.argmin(losses))
        vec, loss = params[best], float(losses[best])
    t2 = time.perf_counter()
    vec = _tilt_without_depth(vec)
    return BranchFit(
        params={p: float(v) for p, v in zip(names, vec, strict=True)},
        loss=loss,
        trials=trial_record(params, losses, batch_of, branch, offset=branch * trials,
                            names=names),
        newton=[dict(step, branch=branch) for step in newton],
        on_box_edge=box_edges(vec, b),
        timings={"search_s": t1 - t0, "newton_s": t2 - t1},
    )


def refine_rotation(
    model: ThickSampleModel, theta: float, transpose: bool, params: Mapping[str, float],
    box: Box, span_deg: float = 3.0, snap: Callable[[float], float] | None = None,
) -> tuple[float, BranchFit]:
    """Minimise the VP loss over θ near the COM estimate, then re-run Newton there.

    The COM curl estimate is noise-limited (~1°); the loss pins θ through the
    aberration phases, which move with the BF frequencies k = R(θ)·T·k_det.
    Returns the refined θ; the Newton runs at ``snap(θ)`` (the angle as the caller will
    store it), and the model is left there.
    """
    b, names = box, box.names
    vec = np.array([[params[p] for p in names]])
    # The trotter masks switch pixels in and out as θ moves, so L(θ) is only piecewise
    # smooth: fit a parabola to a grid instead of trusting a line search.
    grid = theta + np.radians(np.linspace(-span_deg, span_deg, ROTATION_GRID))
    losses = model.evaluate_rotations(grid, transpose, vec, names)
    a, b_, _ = np.polyfit(grid - theta, losses, 2)
    if a > 0:
        refined = theta + float(np.clip(-b_ / (2 * a), grid[0] - theta, grid[-1] - theta))
    else:
        refined = float(grid[int(np.argmin(losses))])
    model.set_rotation(refined if snap is None else snap(refined), transpose)
    t0 = time.perf_counter()
    x, lx, steps = newton_refine(vec, lambda c: model.derivatives(c, names), b, NewtonOptions())
    out = _tilt_without_depth(x[0])
    return refined, BranchFit(
        params={p: float(v) for p, v in zip(names, out, strict=True)}, loss=float(lx[0]),
        trials=[], newton=[dict(st, branch="refined") for st in steps],
        on_box_edge=box_edges(out, b),
        timings={"rotation_refine_s": time.perf_counter() - t0})


def _tilt_without_depth(v: np.ndarray) -> np.ndarray:
    """At zero depth spread the loss does not depend on tilt at all: report it as 0."""
    v = v.copy()
    if v[PARAMS.index("depth")] == 0.0:
        v[PARAMS.index("tilt_row_mrad")] = v[PARAMS.index("tilt_col_mrad")] = 0.0
    return v


def box_edges(v: np.ndarray, box: Box) -> list[str]:
    """Non-periodic parameters sitting on their box edge (the fit may want more room)."""
    width = box.high - box.low
    out = []
    for i, name in enumerate(box.names):
        if name in PERIODS:
            continue
        at_zero = box.low[i] == 0 and v[i] - box.low[i] <= EDGE_TOLERANCE * width[i]
        if name in NON_NEGATIVE and at_zero:
            continue  # zero astigmatism / zero depth are physical values, not walls
        if min(v[i] - box.low[i], box.high[i] - v[i]) <= EDGE_TOLERANCE * width[i]:
            out.append(name)
    return out

"""Joint fit (the six parameters, plus any opted-in coefficients): seeded batched search,
then Newton from the best few."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ..params import NON_NEGATIVE, PERIODS
from ..progress import compile_note
from .fixed import FreeView
from .newton import NewtonOptions, newton_refine
from .progress import NewtonProgress, Progress, ProgressCallback, callback_of
from .search import Box, best_distinct, search, trial_record

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
    # Newton's exact Hessian (free order) at ``params``, None where they are not its point
    hessian: np.ndarray | None = None


def joint_fit(
    view: FreeView,
    trials: int,
    seed: int,
    box: Box,
    objective: str = "vp",
    n_starts: int = 3,
    branch: int = 0,
    progress: Progress = False,
    label: str = "fit",
    sampler: str = "native",
) -> BranchFit:
    """Search ``trials`` seeded candidates in ``box`` (its names are the free fit
    parameters; ``view`` holds the fixed ones), then refine the best ``n_starts`` with
    Newton."""
    b, report = box, callback_of(progress)
    t0 = time.perf_counter()
    # (no bar at all unless asked: a disabled tqdm still costs ~50 µs a map tile)
    with (tqdm(total=trials, desc=label + compile_note(view.model.engine), leave=False)
          if progress is True else contextlib.nullcontext()) as bar:
        scored = [0]

        def on_batch(n: int) -> None:
            if bar is not None:
                bar.update(n)
            if report is not None:
                scored[0] += n
                report("search", scored[0], trials)

        params, losses, batch_of = search(lambda c: view.evaluate(c, objective), b,
                                          trials, seed, on_batch=on_batch, sampler=sampler)
    t1 = time.perf_counter()
    starts = params[best_distinct(params, losses, b, n_starts)]
    newton: list[dict[str, Any]] = []
    hessian = None
    if objective == "vp":
        x, lx, newton, hx = _newton(view, starts, b, report)
        best = int(np.argmin(lx))
        vec, loss, hessian = x[best], float(lx[best]), hx[best]
        polar = _off_the_polar_origin(vec, b)
        if polar is not None:  # Newton ended on C12 = 0, where phi12 has no gradient
            x2, lx2, newton2, hx2 = _newton(view, polar, b, report)
            newton += newton2
            if float(lx2.min()) < loss:
                best = int(np.argmin(lx2))
                vec, loss, hessian = x2[best], float(lx2[best]), hx2[best]
    else:  # the comparison objectives have no derivatives: keep the best trial
        best = int(np.argmin(losses))
        vec, loss = params[best], float(losses[best])
    t2 = time.perf_counter()
    full, out = _tilt_without_depth(view, vec)
    if not np.array_equal(out, vec):  # tilt reported as 0: not Newton's point
        hessian = None
    vec = out
    return BranchFit(
        params=full,
        loss=loss,
        trials=trial_record(view.expand(params), losses, batch_of, branch,
                            offset=branch * trials, names=view.names),
        newton=[dict(step, branch=branch) for step in _with_fixed(view, newton)],
        on_box_edge=box_edges(vec, b),
        timings={"search_s": t1 - t0, "newton_s": t2 - t1}, hessian=hessian,
    )


POLAR_RESTART_C12_A = 2.0  # Å: off the C12 = 0 edge, where Newton can turn phi12 again


def _off_the_polar_origin(vec: np.ndarray, box: Box) -> np.ndarray | None:
    """Newton starts at C12 = 2 Å and four astigmatism angles when ``vec`` sits on the
    box's C12 = 0 edge: there (C12, phi12) is a polar origin, the loss has no gradient
    in phi12, and a bounded Newton that reached it cannot leave (seen on abTEM SrTiO3
    at C10 -120/-150 Å with C12 5 Å: C12 0, C10 3 Å off). None otherwise."""
    names = box.names
    if "C12" not in names or "phi12" not in names:
        return None
    i, j = names.index("C12"), names.index("phi12")
    low, high = float(box.low[i]), float(box.high[i])
    if low != 0.0 or vec[i] > low + EDGE_TOLERANCE * (high - low):
        return None
    starts = np.repeat(vec[None, :], 4, axis=0)
    starts[:, i] = min(POLAR_RESTART_C12_A, 0.5 * high)
    lo_phi = float(box.low[j])
    turns = vec[j] + np.pi / 4 * np.arange(4)  # astigmatism repeats every π
    starts[:, j] = lo_phi + np.mod(turns - lo_phi, np.pi)
    return np.clip(starts, box.low, np.nextafter(box.high, -np.inf))


def newton_fit(
    view: FreeView, start: Mapping[str, float], box: Box, branch: Any = "refine",
    progress: Progress = False,
) -> BranchFit:
    """Bounded trust-region Newton from one start (free names of ``box``)."""
    t0 = time.perf_counter()
    if not box.names:  # all held (the thin model of a fit whose aberrations are fixed)
        held = np.zeros((1, 0))
        return BranchFit(params=_tilt_without_depth(view, held[0])[0],
                         loss=float(view.evaluate(held)[0]), trials=[], newton=[],
                         on_box_edge=[], timings={"newton_s": time.perf_counter() - t0},
                         hessian=np.zeros((0, 0)))
    vec = np.array([[float(start[p]) for p in box.names]])
    x, lx, steps, hx = _newton(view, vec, box, callback_of(progress))
    full, out = _tilt_without_depth(view, x[0])
    return BranchFit(
        params=full, loss=float(lx[0]), trials=[],
        newton=[dict(st, branch=branch) for st in _with_fixed(view, steps)],
        on_box_edge=box_edges(out, box), timings={"newton_s": time.perf_counter() - t0},
        hessian=hx[0] if np.array_equal(out, x[0]) else None)


def refine_rotation(
    view: FreeView, theta: float, transpose: bool, params: Mapping[str, float],
    box: Box, span_deg: float = 3.0, snap: Callable[[float], float] | None = None,
    progress: Progress = False,
) -> tuple[float, BranchFit]:
    """Minimise the VP loss over θ near the COM estimate, then re-run Newton there.

    The COM curl estimate is noise-limited (~1°); the loss pins θ through the
    aberration phases, which move with the BF frequencies k = R(θ)·T·k_det.
    Returns the refined θ; the Newton runs at ``snap(θ)`` (the angle as the caller will
    store it), and the model is left there.
    """
    t0 = time.perf_counter()
    vec = np.array([[params[p] for p in box.names]])
    # A parabola through a grid, not a line search: the scan holds the lobes' pixel sets
    # at the middle θ (smooth in θ), the Newton at the refined θ uses that θ's own.
    grid = theta + np.radians(np.linspace(-span_deg, span_deg, ROTATION_GRID))
    losses = view.evaluate_rotations(grid, transpose, vec)
    a, b_, _ = np.polyfit(grid - theta, losses, 2)
    if a > 0:
        refined = theta + float(np.clip(-b_ / (2 * a), grid[0] - theta, grid[-1] - theta))
    else:
        refined = float(grid[int(np.argmin(losses))])
    view.set_rotation(refined if snap is None else snap(refined), transpose)
    scan_s = time.perf_counter() - t0  # the θ grid and the new rotation's geometry
    fit = newton_fit(view, params, box, branch="refined", progress=progress)
    fit.timings = {"rotation_scan_s": scan_s, "rotation_refine_s": fit.timings["newton_s"]}
    return refined, fit


def _newton(
    view: FreeView, starts: np.ndarray, box: Box, report: ProgressCallback | None,
) -> tuple[np.ndarray, np.ndarray, list[dict[str, Any]], np.ndarray]:
    bar = None if report is None else NewtonProgress(report, NewtonOptions().max_iterations)
    out = newton_refine(starts, view.derivatives, box, NewtonOptions(),
                        on_iteration=None if bar is None else bar.iteration)
    if bar is not None:
        bar.finish()
    return out


def _with_fixed(view: FreeView, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Newton steps with the held values in their params (records list every parameter)."""
    if not view.fixed:
        return steps
    return [dict(st, params=view.full_params(st["params"])) for st in steps]


def _tilt_without_depth(view: FreeView, free: np.ndarray) -> tuple[dict[str, float], np.ndarray]:
    """At zero depth spread the loss does not depend on tilt at all: report it as 0.
    Returns the full parameter dict and the free vector."""
    v = view.expand(free[None])[0].copy()
    names = view.names
    if v[names.index("depth")] == 0.0:
        v[names.index("tilt_row_mrad")] = v[names.index("tilt_col_mrad")] = 0.0
    full = {p: float(x) for p, x in zip(names, v, strict=True)}
    full.update(view.fixed)  # held values exactly as given
    return full, v[view.free_index] if view.fixed else v


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

"""Joint fit of the six parameters: seeded batched search, then Newton from the best few."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ..physics.overlap import PARAMS
from .model import ThickSampleModel
from .newton import NewtonOptions, newton_refine
from .search import Box, best_distinct, search, trial_record

EDGE_TOLERANCE = 1e-3  # fraction of the box width


@dataclass
class BranchFit:
    params: dict[str, float]
    loss: float
    trials: list[dict[str, Any]]
    newton: list[dict[str, Any]]
    on_box_edge: list[str]
    timings: dict[str, float] = field(default_factory=dict)


def joint_fit(
    model: ThickSampleModel,
    trials: int,
    seed: int,
    box: Mapping[str, tuple[float, float]] | None = None,
    objective: str = "vp",
    n_starts: int = 3,
    branch: int = 0,
    progress: bool = False,
    label: str = "fit",
) -> BranchFit:
    """Search ``trials`` seeded candidates, then refine the best ``n_starts`` with Newton."""
    b = Box.from_mapping(box)
    t0 = time.perf_counter()
    with tqdm(total=trials, desc=label, disable=not progress, leave=False) as bar:
        params, losses, batch_of = search(
            lambda c: model.evaluate(c, objective), b, trials, seed, on_batch=bar.update)
    t1 = time.perf_counter()
    starts = params[best_distinct(params, losses, b, n_starts)]
    newton: list[dict[str, Any]] = []
    if objective == "vp":
        x, lx, newton = newton_refine(starts, model.evaluate, model.derivatives, b,
                                      NewtonOptions())
        best = int(np.argmin(lx))
        vec, loss = x[best], float(lx[best])
    else:  # the comparison objectives have no derivatives: keep the best trial
        best = int(np.argmin(losses))
        vec, loss = params[best], float(losses[best])
    t2 = time.perf_counter()
    return BranchFit(
        params={p: float(v) for p, v in zip(PARAMS, vec, strict=True)},
        loss=loss,
        trials=trial_record(params, losses, batch_of, branch, offset=branch * trials),
        newton=[dict(step, branch=branch) for step in newton],
        on_box_edge=box_edges(vec, b),
        timings={"search_s": t1 - t0, "newton_s": t2 - t1},
    )


def box_edges(v: np.ndarray, box: Box) -> list[str]:
    """Non-periodic parameters sitting on their box edge (the fit may want more room)."""
    width = box.high - box.low
    out = []
    for i, name in enumerate(PARAMS):
        if name == "phi12":
            continue
        if name in ("C12", "depth") and box.low[i] == 0 and v[i] - box.low[i] <= EDGE_TOLERANCE * width[i]:
            continue  # zero astigmatism / zero depth are physical values, not walls
        if min(v[i] - box.low[i], box.high[i] - v[i]) <= EDGE_TOLERANCE * width[i]:
            out.append(name)
    return out

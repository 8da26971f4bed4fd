"""The JSON records the widget syncs (docs/widget-protocol.md): regions, fits, trials."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ..cli_text import crystal_mode_text
from ..fit.periods_advice import panel_advice
from ..params import JOINT, OPTIONAL
from ..regions import check_bounds

if TYPE_CHECKING:
    from ..results import FitResult, RegionResult

BOUND_KEYS = ("row_start", "row_stop", "col_start", "col_stop")
REGION_KEYS = ("id", *BOUND_KEYS)
MAX_TRIALS = 50  # best trials listed per fit


def bounds_of(region: dict[str, Any]) -> tuple[int, int, int, int]:
    r0, r1, c0, c1 = (int(region[k]) for k in BOUND_KEYS)
    return (r0, r1, c0, c1)


def region_dict(region_id: str, bounds: tuple[int, int, int, int]) -> dict[str, Any]:
    return {"id": region_id, **{k: int(b) for k, b in zip(BOUND_KEYS, bounds, strict=True)}}


def float_params(params: dict[str, Any]) -> dict[str, float]:
    return {str(k): float(v) for k, v in params.items()}


def best_trials(fit: FitResult, limit: int = MAX_TRIALS) -> list[dict[str, Any]]:
    """The fit's best search trials, best first: ``[{n, params, loss}]``; ``n`` is the
    trial's index in ``fit.trials`` (unique over both rotation branches)."""
    order = sorted(range(len(fit.trials)), key=lambda i: (float(fit.trials[i]["loss"]), i))
    return [{"n": i, "params": float_params(fit.trials[i]["params"]),
             "loss": float(fit.trials[i]["loss"])} for i in order[:limit]]


def with_search_trials(refined: FitResult, before: FitResult | None) -> FitResult:
    """A refinement (Newton only, no trials) recorded with the trials of the search it
    followed, so the calibration saves the trials the widget lists and a restored widget
    lists them again; ``provenance["trials_from"]`` says whose they are."""
    if refined.trials or before is None or not before.trials:
        return refined
    source = before.provenance.get("trials_from", before.provenance.get("mode", "search"))
    return dataclasses.replace(refined, trials=list(before.trials),
                               provenance={**refined.provenance, "trials_from": source})


def trust_record(fit: FitResult) -> dict[str, Any]:
    """``{errors, undetermined, on_box_edge, model, crystal}``: 1-σ errors (``{}`` for
    objectives without them), the names not determined, the names on a box edge, the model
    kept (``"thin"``/``"thick"``, ``None`` where no choice was made) and what crystal mode
    did (the CLI's text; for a per-bin fit "", or the advice to fit a window of few lattice
    periods in crystal mode: fit.periods_advice)."""
    # crystal mode's own thin-or-thick choice where it made one again (fit.lattice_choice)
    choice = (fit.lattice or {}).get("model_choice") or fit.provenance.get("model_choice") or {}
    return {"errors": float_params(fit.errors), "undetermined": [str(n) for n in fit.undetermined],
            "on_box_edge": [str(n) for n in fit.on_box_edge],
            "model": choice.get("kept") if isinstance(choice, dict) else None,
            # what crystal mode did, or the advice to use it (a window of few periods)
            "crystal": crystal_mode_text(fit.lattice) or panel_advice(fit.provenance)}


def full_fit_record(fit: FitResult) -> dict[str, Any]:
    """``{params, loss, errors, undetermined, on_box_edge, model, rotation_deg, transpose,
    timings}``."""
    return {"params": float_params(fit.params), "loss": float(fit.loss), **trust_record(fit),
            "rotation_deg": float(fit.rotation_deg), "transpose": bool(fit.transpose),
            "timings": {str(k): float(v) for k, v in fit.timings.items()}}


def region_record(reg: RegionResult, generation: int, elapsed_s: float) -> dict[str, Any]:
    return {"status": "done", "params": float_params(reg.params), "loss": float(reg.fit.loss),
            **trust_record(reg.fit), "generation": generation, "error": "",
            "bounds": [int(b) for b in reg.bounds], "elapsed_s": round(elapsed_s, 4),
            "trials": best_trials(reg.fit)}


def checked_regions(value: Any, scan_shape: tuple[int, int]) -> list[dict[str, Any]]:
    """``regions`` as sent: ids unique and non-empty, every region by the session's rule
    (``regions.check_bounds``); ValueError names the region and the problem."""
    if not isinstance(value, list | tuple):
        raise ValueError("regions must be a list")
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for item in value:
        if not isinstance(item, dict) or not set(REGION_KEYS) <= set(item):
            raise ValueError(f"a region needs keys {list(REGION_KEYS)}: {item!r}")
        rid = item["id"]
        if not isinstance(rid, str) or not rid:
            raise ValueError(f"region id must be a non-empty string: {rid!r}")
        if rid in seen:
            raise ValueError(f"duplicate region id {rid!r}")
        seen.add(rid)
        try:
            bounds = check_bounds(tuple(item[k] for k in BOUND_KEYS), scan_shape)
        except ValueError as exc:
            raise ValueError(f"region {rid!r}: {exc}") from None
        out.append(region_dict(rid, bounds))
    return out


def refine_start(params: dict[str, float]) -> dict[str, float]:
    """The fit parameters among steered ``params``: the six joint ones (missing: 0) and
    each opt-in group (C21/phi21, C23/phi23, C30) with a nonzero member; reconstruction-only
    coefficients steer the preview but are not fitted."""
    out = {n: float(params.get(n, 0.0)) for n in JOINT}
    for names in OPTIONAL.values():
        if any(float(params.get(n, 0.0)) != 0.0 for n in names):
            out.update({n: float(params.get(n, 0.0)) for n in names})
    return out

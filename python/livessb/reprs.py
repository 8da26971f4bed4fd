"""Concise ``repr`` and notebook ``_repr_html_`` tables for results and sessions.

A FitResult holds every trial and Newton step; its repr shows only what a reader
needs (loss, rotation, parameters with units, record sizes). The classes take
:class:`Pretty` as a base; the functions here do the work, by class name, so this
module imports none of them.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Callable, Mapping
from typing import Any

MAX_THUMB_PX = 256  # the phase thumbnail in a Reconstruction's HTML


def _unit(name: str) -> str:
    from .params import BY_NAME

    p = BY_NAME.get(name)
    return p.unit if p is not None else ""


def _num(value: float, digits: int = 4) -> str:
    return f"{value:.{digits}g}" if math.isfinite(value) else str(value)


def _error(errors: Mapping[str, float] | None, name: str) -> float | None:
    """A parameter's 1-σ error when the fit has one (0.0: held, so none to show)."""
    err = (errors or {}).get(name)
    return err if err is not None and math.isfinite(err) and err > 0 else None


def _params_text(params: Mapping[str, float], errors: Mapping[str, float] | None = None,
                 undetermined: tuple[str, ...] = ()) -> str:
    """``C10=-49.81 ± 0.21 Å, …``; the parameters the data do not determine named once
    at the end instead of a value that means nothing (the thin model's zero tilt)."""
    shown = []
    for k, v in params.items():
        if k in undetermined:
            continue
        err = _error(errors, k)
        shown.append(f"{k}={_num(v)}{'' if err is None else ' ± ' + _num(err, 2)}"
                     f"{(' ' + _unit(k)) if _unit(k) else ''}")
    if undetermined:
        shown.append(f"not determined: {', '.join(undetermined)}")
    return ", ".join(shown)


def _fit_params_text(fit: Any) -> str:
    errors = getattr(fit, "errors", None)
    return _params_text(fit.params, errors if isinstance(errors, Mapping) else None,
                        tuple(getattr(fit, "undetermined", None) or ()))


def _params_rows(params: Mapping[str, float], errors: Mapping[str, float] | None,
                 undetermined: tuple[str, ...] = ()) -> str:
    rows = []
    for name, value in params.items():
        err = _error(errors, name)
        err_cell = ("not determined" if name in undetermined
                    else "" if err is None else f"± {_num(err, 3)}")
        rows.append(f"<tr><td>{html.escape(name)}</td><td style='text-align:right'>"
                    f"{'—' if name in undetermined else _num(value, 6)}</td><td>{err_cell}</td>"
                    f"<td>{html.escape(_unit(name))}</td></tr>")
    return "".join(rows)


def _table(title: str, facts: list[tuple[str, str]], params: Mapping[str, float] | None = None,
           errors: Mapping[str, float] | None = None, extra: str = "",
           undetermined: tuple[str, ...] = ()) -> str:
    head = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                   f"<td colspan='3'>{html.escape(v)}</td></tr>" for k, v in facts)
    body = ""
    if params:
        body = ("<tr><th style='text-align:left'>parameter</th><th>value</th><th>error</th>"
                f"<th>unit</th></tr>{_params_rows(params, errors, undetermined)}")
    return (f"<div class='livessb-repr'><b>{html.escape(title)}</b>"
            f"<table>{head}{body}</table>{extra}</div>")


# -- FitResult --------------------------------------------------------------------

def _fit_facts(fit: Any) -> list[tuple[str, str]]:
    facts = [("loss", _num(fit.loss, 6)),
             ("rotation", f"{fit.rotation_deg:.3f}°" + (" (transposed)" if fit.transpose
                                                         else ""))]
    if fit.bounds is not None:
        facts.append(("region", f"{tuple(fit.bounds)} (stops exclusive)"))
    choice = (getattr(fit, "provenance", None) or {}).get("model_choice")
    if isinstance(choice, Mapping) and choice.get("kept"):
        facts.append(("model", str(choice["kept"])))
    facts.append(("record", f"{len(fit.trials)} trials, {len(fit.newton)} Newton steps"))
    total = (fit.timings or {}).get("total_s")
    if total is not None:
        facts.append(("time", f"{total:.2f} s"))
    if fit.on_box_edge:
        facts.append(("warning", f"on the search box's edge: {', '.join(fit.on_box_edge)}"))
    return facts


def fit_result_text(fit: Any) -> str:
    where = f", bounds={tuple(fit.bounds)}" if fit.bounds is not None else ""
    edge = f", on_box_edge={list(fit.on_box_edge)}" if fit.on_box_edge else ""
    return (f"FitResult(loss={_num(fit.loss, 6)}, rotation_deg={fit.rotation_deg:.3f}, "
            f"transpose={fit.transpose}{where}, {_fit_params_text(fit)}; "
            f"{len(fit.trials)} trials, {len(fit.newton)} Newton steps{edge})")


def _fit_table(title: str, fit: Any, facts: list[tuple[str, str]], params: Mapping[str, float],
               extra: str = "") -> str:
    errors = getattr(fit, "errors", None)
    return _table(title, facts, params, errors if isinstance(errors, Mapping) else None,
                  extra, tuple(getattr(fit, "undetermined", None) or ()))


def fit_result_html(fit: Any) -> str:
    return _fit_table("FitResult", fit, _fit_facts(fit), fit.params)


# -- Reconstruction ----------------------------------------------------------------

def _recon_facts(rec: Any) -> list[tuple[str, str]]:
    rows, cols = rec.shape
    return [("image", f"{rows}×{cols} {rec.object.dtype}, {rec.method}"),
            ("upsample", f"{rec.upsample}x"),
            ("sampling", f"{_num(rec.sampling_A[0])} × {_num(rec.sampling_A[1])} Å/px"),
            ("origin", f"{tuple(rec.origin_px)} px")]


def reconstruction_text(rec: Any) -> str:
    rows, cols = rec.shape
    return (f"Reconstruction({rows}×{cols} {rec.object.dtype}, upsample={rec.upsample}, "
            f"sampling_A=({_num(rec.sampling_A[0])}, {_num(rec.sampling_A[1])}), "
            f"method={rec.method!r}, {_params_text(rec.params)})")


def _thumbnail(phase: Any) -> str:
    from .render import phase_to_png

    step = max(1, math.ceil(max(phase.shape) / MAX_THUMB_PX))
    data = base64.b64encode(phase_to_png(phase[::step, ::step])).decode("ascii")
    return (f"<img alt='phase' src='data:image/png;base64,{data}' "
            "style='image-rendering:pixelated;max-width:256px'/>")


def reconstruction_html(rec: Any) -> str:
    return _table("Reconstruction", _recon_facts(rec), rec.params,
                  extra=_thumbnail(rec.phase))


# -- RegionResult -------------------------------------------------------------------

def region_result_text(reg: Any) -> str:
    rows, cols = reg.crop.shape
    return (f"RegionResult(id={reg.id!r}, bounds={tuple(reg.bounds)}, "
            f"loss={_num(reg.fit.loss, 6)}, {_fit_params_text(reg.fit)}; "
            f"crop {rows}×{cols} at {reg.crop.upsample}x)")


def region_result_html(reg: Any) -> str:
    facts = [("id", str(reg.id)), *_fit_facts(reg.fit), *_recon_facts(reg.crop)[:2]]
    return _fit_table("RegionResult", reg.fit, facts, reg.params, _thumbnail(reg.crop.phase))


# -- Session -------------------------------------------------------------------------

def _session_facts(s: Any) -> list[tuple[str, str]]:
    facts = [("dataset", repr(s.dataset)), ("device", "closed" if s.closed else s.device)]
    if s.rotation_deg is not None:
        facts.append(("rotation", f"{s.rotation_deg:.3f}°" + (" (transposed)" if s.transpose
                                                               else "")))
    if s.full_fit is not None:
        facts.append(("full-field loss", _num(s.full_fit.loss, 6)))
    facts.append(("regions", ", ".join(f"{rid} {tuple(r.bounds)}" for rid, r in
                                       s.regions.items()) or "none"))
    facts.append(("Auto upsampling", f"{s.upsample_factor}x"))
    return facts


def session_text(s: Any) -> str:
    state = "closed" if s.closed else f"device={s.device!r}"
    fit = (f", rotation_deg={s.rotation_deg:.3f}, loss={_num(s.full_fit.loss, 6)}"
           if s.full_fit is not None and s.rotation_deg is not None else ", not fitted")
    return f"Session({state}, {s.dataset!r}{fit}, regions={list(s.regions)})"


def session_html(s: Any) -> str:
    params = s.full_fit.params if s.full_fit is not None else None
    return _table("Session", _session_facts(s), params)


_TEXT: dict[str, Callable[[Any], str]] = {
    "FitResult": fit_result_text, "Reconstruction": reconstruction_text,
    "RegionResult": region_result_text, "Session": session_text}
_HTML: dict[str, Callable[[Any], str]] = {
    "FitResult": fit_result_html, "Reconstruction": reconstruction_html,
    "RegionResult": region_result_html, "Session": session_html}


def _for(table: dict[str, Callable[[Any], str]], obj: Any) -> Callable[[Any], str] | None:
    for cls in type(obj).__mro__:
        if cls.__name__ in table:
            return table[cls.__name__]
    return None


class Pretty:
    """Base class: concise ``repr`` and a notebook table (``dataclass(repr=False)``)."""

    def __repr__(self) -> str:
        fn = _for(_TEXT, self)
        return fn(self) if fn is not None else object.__repr__(self)

    def _repr_html_(self) -> str:
        fn = _for(_HTML, self)
        return fn(self) if fn is not None else html.escape(repr(self))

"""Matplotlib figures for people who'd rather look.

Every function builds a :class:`matplotlib.figure.Figure` directly (no pyplot
state, safe with the Agg backend and in threads) unless an ``ax`` is passed,
and returns the figure. In Jupyter a returned figure displays inline.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from .params import BY_NAME, JOINT, NON_NEGATIVE
from .preprocess.plots import plot_descan as plot_descan  # re-exported: livessb.plots

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from .dataset import Dataset4D
    from .fit.model import ThickSampleModel
    from .results import FitResult, Reconstruction

# Half-widths of the loss slices when neither ``span`` nor the fit's box says otherwise.
DEFAULT_SPAN: dict[str, float] = {k: float(BY_NAME[k].slice_span or 1.0) for k in JOINT}


def _new_figure(figsize: tuple[float, float]) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=figsize, layout="constrained")


def _figure_of(ax: Axes) -> Figure:
    fig = ax.get_figure()
    if fig is None:  # pragma: no cover - axes always belong to a figure here
        raise ValueError("the axes do not belong to a figure")
    return fig  # type: ignore[return-value]


def nice_length(target: float) -> float:
    """The 1-2-5 x 10^n value closest below ``target`` (> 0)."""
    if not (math.isfinite(target) and target > 0):
        raise ValueError(f"target length must be positive, got {target!r}")
    exp = math.floor(math.log10(target))
    for m in (5.0, 2.0, 1.0):
        if m * 10**exp <= target:
            return m * 10**exp
    return 10.0**exp  # pragma: no cover


def scale_bar_length(width_A: float, fraction: float = 0.2) -> tuple[float, str]:
    """A round scale-bar length in Å about ``fraction`` of the width, and its label."""
    length = nice_length(width_A * fraction)
    if length >= 10:
        nm = length / 10
        return length, f"{nm:g} nm"
    return length, f"{length:g} Å"


def plot_phase(rec: Reconstruction, ax: Axes | None = None, scale_bar: bool = True,
               cmap: str = "gray", title: str | None = None,
               percentiles: tuple[float, float] = (0.5, 99.5)) -> Figure:
    """Phase (rad) with a scale bar from ``rec.sampling_A`` (nm above 1 nm, else Å)."""
    from matplotlib.patches import Rectangle

    phase = np.asarray(rec.phase, dtype=np.float32)
    if ax is None:
        fig = _new_figure((5.0, 5.0 * phase.shape[0] / max(phase.shape[1], 1) + 0.6))
        ax = fig.add_subplot()
    else:
        fig = _figure_of(ax)
    finite = phase[np.isfinite(phase)]
    vmin, vmax = (np.percentile(finite, percentiles) if finite.size else (0.0, 1.0))
    im = ax.imshow(phase, cmap=cmap, vmin=float(vmin), vmax=float(vmax),
                   interpolation="nearest")
    fig.colorbar(im, ax=ax, shrink=0.8, label="phase (rad)")
    ax.set_xticks([])
    ax.set_yticks([])
    if title is None:
        title = f"{rec.method} phase, {rec.shape[0]}×{rec.shape[1]} px (×{rec.upsample})"
    ax.set_title(title)
    if scale_bar:
        dc = float(rec.sampling_A[1])
        width_A = phase.shape[1] * dc
        length_A, label = scale_bar_length(width_A)
        bar_px = length_A / dc
        h, w = phase.shape
        x0, y0 = 0.05 * w, 0.93 * h
        thickness = max(0.012 * h, 0.5)
        ax.add_patch(Rectangle((x0, y0), bar_px, thickness, color="white", ec="black",
                               lw=0.5))
        ax.text(x0 + bar_px / 2, y0 - 0.01 * h, label, color="white", ha="center",
                va="bottom", fontsize=9,
                bbox={"facecolor": "black", "alpha": 0.4, "pad": 1, "lw": 0})
        ax.scale_bar_A = length_A  # type: ignore[attr-defined]  # for tests/inspection
    return fig


def fitted_text(fit: FitResult, name: str) -> str:
    """``"C10 = -12.3 ± 0.4 Å"`` (digits and unit of the parameter table), ``"… not
    determined"`` for a parameter the data do not determine, a warning on a box edge."""
    p = BY_NAME[name]
    if name in fit.undetermined:
        return f"{p.label}: not determined"
    value = f"{float(fit.params[name]):.{p.digits}f}"
    err = fit.errors.get(name)
    if err is not None and math.isfinite(err) and err > 0:
        value += f" ± {float(err):.{p.digits}f}"
    edge = " (on box edge!)" if name in fit.on_box_edge else ""
    return f"{p.label} = {value} {p.unit}".rstrip() + edge


def _trust_line(fit: FitResult) -> str:
    """The model kept and the parameters not determined, for a figure title."""
    kept = (fit.provenance.get("model_choice") or {}).get("kept")
    parts = [f"{kept} model"] if kept else []
    if fit.undetermined:
        parts.append("not determined: " + ", ".join(BY_NAME[n].label for n in fit.undetermined))
    if fit.on_box_edge:
        parts.append("on box edge: " + ", ".join(BY_NAME[n].label for n in fit.on_box_edge))
    return "; ".join(parts)


def plot_trials(fit: FitResult, ax: Axes | None = None) -> Figure:
    """Loss vs trial number (per branch), best so far, and the Newton steps after them."""
    if ax is None:
        fig = _new_figure((7.0, 4.0))
        ax = fig.add_subplot()
    else:
        fig = _figure_of(ax)
    trials = sorted(fit.trials, key=lambda t: int(t.get("number", 0)))
    numbers = np.array([int(t.get("number", i)) for i, t in enumerate(trials)], dtype=float)
    losses = np.array([float(t["loss"]) for t in trials], dtype=float)
    branches = np.array([int(t.get("branch", 0)) for t in trials])
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:purple"]
    for b in sorted(set(branches.tolist())):
        sel = branches == b
        label = f"trials (branch {b})" if len(set(branches.tolist())) > 1 else "trials"
        ax.scatter(numbers[sel], losses[sel], s=10, alpha=0.6, color=colors[b % 4],
                   label=label)
    if losses.size:
        ax.plot(numbers, np.minimum.accumulate(losses), color="black", lw=1.2,
                label="best so far")
    if fit.newton:
        start = (numbers.max() + 1) if numbers.size else 0
        steps = np.arange(len(fit.newton), dtype=float) + start
        nl = np.array([float(s.get("loss", np.nan)) for s in fit.newton])
        accepted = np.array([bool(s.get("accepted", True)) for s in fit.newton])
        ax.scatter(steps[accepted], nl[accepted], marker="x", color="tab:red", s=30,
                   label="Newton step (accepted)")
        if (~accepted).any():
            ax.scatter(steps[~accepted], nl[~accepted], marker="x", color="0.6", s=20,
                       label="Newton step (rejected)")
        ax.axvline(start - 0.5, color="0.7", lw=0.8, ls="--")
    ax.axhline(float(fit.loss), color="tab:red", lw=0.8, ls=":",
               label=f"final loss {fit.loss:.4g}")
    ax.set_xlabel("trial / step number")
    ax.set_ylabel("loss")
    title = f"search record: {len(trials)} trials, {len(fit.newton)} Newton steps"
    trust = _trust_line(fit)
    ax.set_title(f"{title}\n{trust}" if trust else title, fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    return fig


def _spans(fit: FitResult, span: Mapping[str, float] | float | None) -> dict[str, float]:
    if isinstance(span, int | float):
        return {k: float(span) * DEFAULT_SPAN[k] for k in JOINT}
    out = dict(DEFAULT_SPAN)
    box = fit.provenance.get("box") if isinstance(fit.provenance, dict) else None
    if isinstance(box, Mapping):
        for k in JOINT:
            try:
                lo, hi = (float(v) for v in box[k])
            except (KeyError, TypeError, ValueError):
                continue
            if hi > lo:
                out[k] = 0.1 * (hi - lo)
    if isinstance(span, Mapping):
        unknown = set(span) - set(JOINT)
        if unknown:
            raise ValueError(f"span has unknown parameters {sorted(unknown)}: use "
                             f"{JOINT}")
        out.update({k: float(v) for k, v in span.items()})
    for k, v in out.items():
        if not (math.isfinite(v) and v > 0):
            raise ValueError(f"span[{k!r}] must be positive, got {v!r}")
    return out


def loss_slices(fit: FitResult, evaluate: Callable[[np.ndarray], np.ndarray],
                span: Mapping[str, float] | float | None = None,
                points: int = 41) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """1-D slices of the loss through ``fit.params``: {name: (values, losses)}.

    One batch call of ``evaluate`` with a ``(6 * points, 6)`` array of parameter
    vectors in ``JOINT`` order; it must return ``6 * points`` losses.
    """
    spans = _spans(fit, span)
    centre = np.array([float(fit.params[k]) for k in JOINT], dtype=np.float64)
    grids: list[np.ndarray] = []
    batch = np.repeat(centre[None], len(JOINT) * points, axis=0)
    for i, k in enumerate(JOINT):
        lo, hi = centre[i] - spans[k], centre[i] + spans[k]
        if k in NON_NEGATIVE:
            lo = max(lo, 0.0)
        grid = np.linspace(lo, hi, points)
        grids.append(grid)
        batch[i * points:(i + 1) * points, i] = grid
    losses = np.asarray(evaluate(batch), dtype=np.float64).reshape(-1)
    if losses.shape[0] != batch.shape[0]:
        raise ValueError(
            f"evaluate returned {losses.shape[0]} losses for {batch.shape[0]} parameter "
            "vectors: it must map a (K, 6) array to K losses")
    return {k: (grids[i], losses[i * points:(i + 1) * points])
            for i, k in enumerate(JOINT)}


def plot_loss_slices(fit: FitResult, evaluate: Callable[[np.ndarray], np.ndarray],
                     span: Mapping[str, float] | float | None = None,
                     points: int = 41) -> Figure:
    """The loss along each of the six parameters through the fit (2×3 panels).

    ``span``: half-widths per parameter (dict), a factor on the defaults (float), or
    ``None`` (10 % of the fit's search box when recorded, else ``DEFAULT_SPAN``).
    """
    slices = loss_slices(fit, evaluate, span, points)
    fig = _new_figure((10.0, 6.0))
    axes = fig.subplots(2, 3)
    for ax, k in zip(axes.ravel(), JOINT, strict=True):
        x, y = slices[k]
        ax.plot(x, y, color="tab:blue")
        ax.axvline(float(fit.params[k]), color="tab:red", lw=0.8, ls="--")
        ax.scatter([float(fit.params[k])], [float(fit.loss)], color="tab:red", zorder=3, s=15)
        ax.set_xlabel(f"{k} ({BY_NAME[k].unit})")
        ax.set_ylabel("loss")
        ax.set_title(fitted_text(fit, k), fontsize=9,
                     color="tab:red" if k in fit.on_box_edge else "black")
    trust = _trust_line(fit)
    fig.suptitle("loss slices through the fit" + (f" ({trust})" if trust else ""))
    return fig


def rotated_com(com: np.ndarray, rotation_deg: float, transpose: bool) -> np.ndarray:
    """COM vectors (…, 2) in detector (row, col) → scan frame: R(θ)·T·v."""
    v = np.asarray(com, dtype=np.float64)
    if transpose:
        v = v[..., ::-1]
    th = math.radians(rotation_deg)
    c, s = math.cos(th), math.sin(th)
    return np.stack([c * v[..., 0] - s * v[..., 1], s * v[..., 0] + c * v[..., 1]], axis=-1)


def plot_bright_field(ds: Dataset4D, rotation_deg: float, transpose: bool,
                      com: np.ndarray | None = None, max_arrows: int = 24) -> Figure:
    """Mean pattern with the BF circle, and the COM field rotated into the scan frame.

    Left: the mean diffraction pattern (log scale) with the aperture circle
    (radius ``semiangle / detector_sampling``) at the measured BF centre. Right:
    the divergence of the rotated COM field (the projected charge, when the
    rotation is right) with the rotated COM vectors (quiver, subsampled).
    ``com``: precomputed COM ``(Rr, Rc, 2)`` in detector px, else computed here.
    """
    from matplotlib.patches import Circle

    bf = ds.bright_field
    if com is None:
        from .physics.geometry import center_of_mass

        com = center_of_mass(ds.counts, (bf.center_row, bf.center_col))
    com = np.asarray(com, dtype=np.float64)
    if com.shape != (*ds.scan_shape, 2):
        raise ValueError(f"com must have shape {(*ds.scan_shape, 2)}, got {com.shape}")
    field = rotated_com(com - com.mean(axis=(0, 1)), rotation_deg, transpose)
    div = np.gradient(field[..., 0], axis=0) + np.gradient(field[..., 1], axis=1)

    fig = _new_figure((10.0, 4.8))
    ax0, ax1 = fig.subplots(1, 2)
    pattern = np.asarray(ds.mean_pattern, dtype=np.float64)
    positive = pattern[pattern > 0]
    floor = float(positive.min()) if positive.size else 1.0
    ax0.imshow(np.log10(np.maximum(pattern, floor)), cmap="magma", interpolation="nearest")
    radius = ds.semiangle_mrad / ds.detector_sampling_mrad
    ax0.add_patch(Circle((bf.center_col, bf.center_row), radius, fill=False, color="cyan",
                         lw=1.2))
    ax0.plot([bf.center_col], [bf.center_row], "+", color="cyan")
    src = "derived" if ds.detector_sampling_derived else "given"
    ax0.set_title(f"mean pattern (log), BF r={radius:.1f} px\n"
                  f"{ds.detector_sampling_mrad:.3g} mrad/px ({src})", fontsize=10)
    ax0.set_xlabel("detector col (px)")
    ax0.set_ylabel("detector row (px)")

    ax1.imshow(div, cmap="gray", interpolation="nearest")
    rows, cols = ds.scan_shape
    step = max(1, math.ceil(max(rows, cols) / max_arrows))
    rr, cc = np.mgrid[0:rows:step, 0:cols:step]
    sub = field[::step, ::step]
    # quiver in image coordinates: x = col, y = row (rows grow downwards)
    ax1.quiver(cc, rr, sub[..., 1], sub[..., 0], color="tab:orange", angles="xy",
               pivot="middle")
    ax1.set_title(f"COM rotated by {rotation_deg:.1f}°{' + transpose' if transpose else ''}"
                  "\n(background: divergence)", fontsize=10)
    ax1.set_xlabel("scan col")
    ax1.set_ylabel("scan row")
    return fig


def session_figures(ds: Dataset4D, fit: FitResult, model: ThickSampleModel,
                    full: ThickSampleModel | None, rotation_deg: float, transpose: bool,
                    center_of_mass: Callable[[], np.ndarray]) -> list[Figure]:
    """``Session.plot_diagnostics``: BF disk + rotated COM field, trial history, loss
    slices of ``model`` (the full field's, or a region's released after)."""
    try:
        slices = plot_loss_slices(fit, model.evaluate)
    finally:
        if model is not full:
            model.release()  # a region's spectra are not kept for a plot
    return [plot_bright_field(ds, rotation_deg, transpose, center_of_mass()),
            plot_trials(fit), slices]

"""Figures of a MapResult: every parameter as a map over the scan with its error beside it.

Each tile is drawn as the cell around its centre (half the step to each side, the outer
cells reaching the scan edge), so overlapping tiles do not hide each other. Tiles where
the parameter is not determined are hatched, tiles on a box edge carry a cross, and a
parameter held fixed says so in its title.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .params import BY_NAME
from .plots import _new_figure

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from .maps import MapResult


def cell_edges(centers: np.ndarray, n_scan: int) -> np.ndarray:
    """Cell edges (scan px) around tile centres along one axis: midpoints between centres,
    the outer edges at the scan border (-0.5 and n - 0.5)."""
    c = np.asarray(centers, dtype=np.float64)
    mid = 0.5 * (c[:-1] + c[1:])
    return np.concatenate([[-0.5], mid, [n_scan - 0.5]])


def _mark_tiles(ax: Axes, m: MapResult, name: str, edges_r: np.ndarray,
                edges_c: np.ndarray) -> None:
    from matplotlib.patches import Rectangle

    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            r0, r1, c0, c1 = edges_r[i], edges_r[i + 1], edges_c[j], edges_c[j + 1]
            if m.undetermined[name][i, j]:
                ax.add_patch(Rectangle((c0, r0), c1 - c0, r1 - r0, fill=False, hatch="///",
                                       edgecolor="white", linewidth=0))
            if m.on_box_edge[name][i, j]:
                ax.plot([0.5 * (c0 + c1)], [0.5 * (r0 + r1)], marker="x", color="red",
                        markersize=8)


def plot_map(m: MapResult, names: list[str] | None = None, cmap: str = "viridis",
             scan_shape: tuple[int, int] | None = None) -> Figure:
    """One row per parameter: its map (value) and its 1-σ error map. ``scan_shape``
    defaults to the extent of the tiles."""
    names = names or m.names
    unknown = [n for n in names if n not in m.params]
    if unknown:
        raise KeyError(f"no map of {unknown}: the map has {m.names}")
    rows = scan_shape[0] if scan_shape else int(m.bounds[..., 1].max())
    cols = scan_shape[1] if scan_shape else int(m.bounds[..., 3].max())
    edges_r = cell_edges(m.centers_px[:, 0, 0], rows)
    edges_c = cell_edges(m.centers_px[0, :, 1], cols)
    fig = _new_figure((8.0, 3.2 * len(names)))
    axes = fig.subplots(len(names), 2, squeeze=False)
    for k, name in enumerate(names):
        p = BY_NAME[name]
        held = " (fixed)" if name in m.fixed else ""
        if not held and m.undetermined[name].all():
            held = " (not determined)"
        elif not held and m.undetermined[name].any():
            held = " (hatched: not determined)"
        for col, (data, what) in enumerate(((m.params[name], p.label),
                                            (m.errors[name], f"σ({p.label})"))):
            ax = axes[k, col]
            ax.set_title(f"{what} [{p.unit}]{held}")
            finite = np.isfinite(data)
            if not finite.any():
                ax.text(0.5, 0.5, "errors not available" if col else "no values",
                        ha="center", va="center", transform=ax.transAxes)
                ax.set_xlim(-0.5, cols - 0.5)
                ax.set_ylim(rows - 0.5, -0.5)
            else:
                mesh = ax.pcolormesh(edges_c, edges_r, np.ma.masked_invalid(data), cmap=cmap)
                fig.colorbar(mesh, ax=ax, label=p.unit)
                ax.set_ylim(rows - 0.5, -0.5)
            _mark_tiles(ax, m, name, edges_r, edges_c)
            ax.set_xlabel("scan col (px)")
            ax.set_ylabel("scan row (px)")
            ax.set_aspect("equal")
    return fig


def map_summary(m: MapResult) -> dict[str, Any]:
    """Per parameter: mean, spread and median error over the tiles (NaN-safe)."""
    out: dict[str, Any] = {}
    for name, values in m.params.items():
        err = m.errors[name]
        out[name] = {"mean": float(np.mean(values)), "std": float(np.std(values)),
                     "median_error": float(np.nanmedian(err)) if np.isfinite(err).any()
                     else None, "undetermined_tiles": int(m.undetermined[name].sum())}
    return out

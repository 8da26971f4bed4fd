"""MapResult: the joint fit on every tile of a grid, as 2-D arrays over the tile grid.

The record lives on the host and stays valid after its session closes; only
``reconstruct`` needs the live session (it reconstructs through it). The tiles'
FitResults are the single source: ``params``, ``errors``, ``losses`` and the flags are
derived from them, so a saved map (``to_dict``) restores without refitting.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .params import BY_NAME
from .results import Bounds, FitResult, Reconstruction

if TYPE_CHECKING:
    from .session import Session


class MapSessionError(RuntimeError):
    """The map has no live session to reconstruct through."""


def _tile_errors(fit: FitResult, names: list[str], fixed: dict[str, float]) -> list[float]:
    """1-σ errors of one tile (NaN where the fit carries none; 0 for held parameters)."""
    errors = getattr(fit, "errors", None) or {}
    out = []
    for n in names:
        if n in fixed:
            out.append(0.0)
        elif n in errors and errors[n] is not None:
            out.append(float(errors[n]))
        else:
            out.append(math.nan)
    return out


@dataclass(eq=False)  # arrays inside: compare fields explicitly
class MapResult:
    """Tile grid (rows × cols of tiles), each tile's fit and the arrays derived from them.

    ``params[name]``, ``errors[name]``: (rows, cols) arrays; ``losses`` (rows, cols);
    ``bounds`` (rows, cols, 4) scan px, stops exclusive; ``centers_px`` (rows, cols, 2)
    tile centres in scan px (row, col), the mean position of the tile; ``undetermined``
    and ``on_box_edge``: per name, (rows, cols) booleans.
    """

    tile: tuple[int, int]
    step: tuple[int, int]
    fits: list[list[FitResult]]
    fixed: dict[str, float]
    rotation_deg: float
    transpose: bool
    params: dict[str, np.ndarray]
    errors: dict[str, np.ndarray]
    losses: np.ndarray
    bounds: np.ndarray
    centers_px: np.ndarray
    undetermined: dict[str, np.ndarray]
    on_box_edge: dict[str, np.ndarray]
    timings: dict[str, float] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    _session: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def from_fits(
        cls, fits: list[list[FitResult]], tile: tuple[int, int], step: tuple[int, int],
        fixed: dict[str, float], rotation_deg: float, transpose: bool,
        timings: dict[str, float] | None = None, provenance: dict[str, Any] | None = None,
    ) -> MapResult:
        names = list(fits[0][0].params)
        shape = (len(fits), len(fits[0]))
        values = np.array([[[f.params[n] for n in names] for f in row] for row in fits])
        errs = np.array([[_tile_errors(f, names, fixed) for f in row] for row in fits])
        bounds = np.array([[list(f.bounds or ()) for f in row] for row in fits],
                          dtype=np.int64).reshape(*shape, 4)
        # Mean position of the tile's positions (stops exclusive), as in SimulationTruth.
        centers = np.stack([0.5 * (bounds[..., 0] + bounds[..., 1] - 1),
                            0.5 * (bounds[..., 2] + bounds[..., 3] - 1)], axis=-1)

        def flags(attr: str) -> dict[str, np.ndarray]:
            return {n: np.array([[n in (getattr(f, attr, None) or ()) for f in row]
                                 for row in fits], dtype=bool) for n in names}

        return cls(
            tile=(int(tile[0]), int(tile[1])), step=(int(step[0]), int(step[1])), fits=fits,
            fixed=dict(fixed), rotation_deg=float(rotation_deg), transpose=bool(transpose),
            params={n: values[..., i] for i, n in enumerate(names)},
            errors={n: errs[..., i] for i, n in enumerate(names)},
            losses=np.array([[f.loss for f in row] for row in fits], dtype=np.float64),
            bounds=bounds, centers_px=centers.astype(np.float64),
            undetermined=flags("undetermined"), on_box_edge=flags("on_box_edge"),
            timings=dict(timings or {}), provenance=dict(provenance or {}))

    @property
    def shape(self) -> tuple[int, int]:
        """(tile rows, tile cols) of the grid."""
        return (len(self.fits), len(self.fits[0]))

    @property
    def names(self) -> list[str]:
        return list(self.params)

    def tile_bounds(self) -> list[Bounds]:
        """Every tile's bounds, row-major."""
        return [(int(a), int(b), int(c), int(d)) for a, b, c, d in self.bounds.reshape(-1, 4)]

    # -- the live session -----------------------------------------------------------
    def attach(self, session: Session) -> None:
        """Reconstruct through ``session`` (held weakly: the map keeps no session alive)."""
        self._session = weakref.ref(session)

    def detach(self) -> None:
        """No session to reconstruct through any more (it moved to another scan)."""
        self._session = None

    def reconstruct(self, upsample: int | str = "auto", method: str = "ssb",
                    density: int | str = "auto") -> Reconstruction:
        """Full field, each place corrected with its local fit (``Session.reconstruct_map``)."""
        session = self._session() if self._session is not None else None
        if session is None:
            raise MapSessionError(
                "this map has no session to reconstruct through (it was restored from a "
                "record, its session is gone, or it moved to another scan with load_scan): "
                "open a Session on the same data and call "
                "session.reconstruct_map(map)")
        result: Reconstruction = session.reconstruct_map(self, upsample=upsample,
                                                         method=method, density=density)
        return result

    # -- views ------------------------------------------------------------------------
    def plot(self, names: list[str] | None = None, **options: Any) -> Any:
        """Each parameter as a map with its error (``livessb.map_plots``)."""
        from .map_plots import plot_map

        return plot_map(self, names, **options)

    def overlay(self, parameter: str) -> dict[str, Any]:
        """A JSON-able record of one parameter over the scan (for the widget): tile bounds
        and centres, values, errors (None where unknown), flags, unit and label."""
        if parameter not in self.params:
            raise KeyError(f"no map of {parameter!r}: the map has {self.names}")
        p = BY_NAME[parameter]
        values = self.params[parameter]

        def listed(a: np.ndarray) -> list[list[float | None]]:
            return [[None if not math.isfinite(v) else float(v) for v in row]
                    for row in a.tolist()]

        finite = values[np.isfinite(values)]
        return {
            "parameter": parameter, "label": p.label, "unit": p.unit, "digits": p.digits,
            "grid_shape": list(self.shape), "tile": list(self.tile), "step": list(self.step),
            "bounds": self.bounds.tolist(), "centers_px": self.centers_px.tolist(),
            "values": listed(values), "errors": listed(self.errors[parameter]),
            "undetermined": self.undetermined[parameter].tolist(),
            "on_box_edge": self.on_box_edge[parameter].tolist(),
            "fixed": parameter in self.fixed,
            "range": [float(finite.min()), float(finite.max())] if finite.size else None,
        }

    # -- records ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"tile": list(self.tile), "step": list(self.step), "fixed": dict(self.fixed),
                "rotation_deg": self.rotation_deg, "transpose": self.transpose,
                "grid_shape": list(self.shape),
                "fits": [f.to_dict() for row in self.fits for f in row],
                "timings": dict(self.timings), "provenance": dict(self.provenance)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MapResult:
        rows, cols = (int(n) for n in d["grid_shape"])
        flat = [FitResult.from_dict(f) for f in d["fits"]]
        if len(flat) != rows * cols or not flat:
            raise ValueError(f"map record holds {len(flat)} fits for a {rows}x{cols} grid")
        fits = [flat[r * cols:(r + 1) * cols] for r in range(rows)]
        return cls.from_fits(fits, tile=tuple(d["tile"]), step=tuple(d["step"]),
                             fixed=dict(d.get("fixed", {})), rotation_deg=d["rotation_deg"],
                             transpose=d["transpose"], timings=d.get("timings"),
                             provenance=d.get("provenance"))

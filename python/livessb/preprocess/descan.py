"""Descan: the BF disk centre per scan position (robust), its fit (plane or smooth
polynomial) and the fitted shift field that the correction undoes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..xp import download_many, module_of, to_host

DISK_RAMP = (0.25, 0.75)  # weight 0 below 25 % of the disk level, 1 above 75 %
TARGET_COUNTS = 30.0  # counts per disk pixel a measurement block should collect
SIGNIFICANCE = 5.0  # a fitted span must exceed this many of its standard errors


def terms(degree: int) -> list[tuple[int, int]]:
    """Monomials u^p v^q of the fit, constant first."""
    return [(p, t - p) for t in range(degree + 1) for p in range(t, -1, -1)]


def normalised_coords(scan_shape: tuple[int, int], rows: Any, cols: Any) -> tuple[Any, Any]:
    """Scan positions (px) as u, v in [-1, 1] about the scan centre."""
    hr, hc = (max(0.5 * (n - 1), 1.0) for n in scan_shape)
    return (rows - 0.5 * (scan_shape[0] - 1)) / hr, (cols - 0.5 * (scan_shape[1] - 1)) / hc


def design(u: Any, v: Any, degree: int) -> Any:
    """The monomials at (u, v), last axis: in the array module of ``u``."""
    return module_of(u).stack([u**p * v**q for p, q in terms(degree)], axis=-1)


@dataclass(frozen=True, eq=False)
class DescanFit:
    """Fitted BF disk centre over the scan (detector px, (row, col)).

    ``coefficients`` (2, n_terms) multiply the monomials ``terms(degree)`` of the scan
    position normalised to [-1, 1]; the constant is the centre at the scan centre (the
    dataset's BF centre stays the reference, so the correction undoes the variation
    only). ``span_px``: the largest peak-to-peak of the fitted variation over the scan,
    either component; ``residual_rms_px``: RMS distance of the kept measurements from
    the fit; ``significant``: span ≥ ``threshold_px`` and ≥ 5 standard errors.
    ``measured`` (blocks_r, blocks_c, 2) and ``positions`` hold the measurements and
    their block centres (scan px) for plots (absent after a restore).
    """

    model: str
    degree: int
    coefficients: np.ndarray
    scan_shape: tuple[int, int]
    residual_rms_px: float
    span_px: float
    span_error_px: float
    threshold_px: float
    block: int
    measured: np.ndarray | None = None
    positions: np.ndarray | None = None

    @property
    def significant(self) -> bool:
        return bool(self.span_px >= self.threshold_px
                    and self.span_px >= SIGNIFICANCE * self.span_error_px)

    @property
    def px_per_px(self) -> tuple[float, float, float, float]:
        """Linear part (a_rr, a_rc, a_cr, a_cc): detector px per scan px at the centre."""
        hr, hc = (max(0.5 * (n - 1), 1.0) for n in self.scan_shape)
        c = self.coefficients  # terms: 1, u, v, ...
        return (float(c[0, 1] / hr), float(c[0, 2] / hc), float(c[1, 1] / hr),
                float(c[1, 2] / hc))

    def centre_map(self, variation_only: bool = False) -> np.ndarray:
        """Fitted centre (or its variation) at every scan position: (Rr, Rc, 2)."""
        out: np.ndarray = centre_map(np, self.coefficients, self.scan_shape, self.degree,
                                     variation_only)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "degree": int(self.degree),
                "coefficients": [[float(x) for x in row] for row in self.coefficients],
                "scan_shape": [int(s) for s in self.scan_shape],
                "residual_rms_px": float(self.residual_rms_px),
                "span_px": float(self.span_px), "span_error_px": float(self.span_error_px),
                "threshold_px": float(self.threshold_px), "block": int(self.block),
                "px_per_px": list(self.px_per_px), "significant": self.significant}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DescanFit:
        coeffs = np.asarray(d["coefficients"], dtype=np.float64)
        degree = int(d["degree"])
        if coeffs.shape != (2, len(terms(degree))):
            raise ValueError(f"descan coefficients of shape {coeffs.shape} do not match "
                             f"degree {degree}")
        return cls(model=str(d["model"]), degree=degree, coefficients=coeffs,
                   scan_shape=(int(d["scan_shape"][0]), int(d["scan_shape"][1])),
                   residual_rms_px=float(d["residual_rms_px"]), span_px=float(d["span_px"]),
                   span_error_px=float(d["span_error_px"]),
                   threshold_px=float(d["threshold_px"]), block=int(d["block"]))


def disk_window(mean_pattern: np.ndarray, level: float) -> tuple[slice, slice, np.ndarray]:
    """Detector box and window (bool) around everything the disk reaches over the scan:
    the mean pattern above 2 % of the disk level, grown by 2 px."""
    reach = mean_pattern > 0.02 * level
    grown = reach.copy()
    for _ in range(2):
        g = grown.copy()
        g[1:] |= grown[:-1]
        g[:-1] |= grown[1:]
        g[:, 1:] |= grown[:, :-1]
        g[:, :-1] |= grown[:, 1:]
        grown = g
    rows, cols = np.nonzero(grown)
    box = (slice(int(rows.min()), int(rows.max()) + 1), slice(int(cols.min()), int(cols.max()) + 1))
    return box[0], box[1], grown[box]


def block_size(level: float) -> int:
    """Scan block edge (positions) that collects ``TARGET_COUNTS`` per disk pixel."""
    if not level > 0:
        return 1
    return max(1, math.ceil(math.sqrt(TARGET_COUNTS / level) - 1e-9))


def block_sums(xp: Any, x: Any, b: int) -> Any:
    """Sums of ``x`` (scan rows, scan cols, ...) over b×b scan blocks, the last ones
    partial: (⌈rows/b⌉, ⌈cols/b⌉, ...) float64 in ``x``'s array module ``xp``. Exact for
    integer-valued data (and float32 values, whose few significant bits float64 adds
    without rounding), so the order of the additions does not matter."""
    if b == 1:
        return x.astype(xp.float64, copy=False)
    n, m = x.shape[:2]
    nr, nc = -(-n // b), -(-m // b)
    # Zero padding to whole blocks (zeros add nothing) turns the sums into one reshape,
    # the same operations whether or not the scan divides into blocks.
    padded = xp.zeros((nr * b, nc * b, *x.shape[2:]), dtype=xp.float64)
    padded[:n, :m] = x
    return padded.reshape(nr, b, nc, b, *x.shape[2:]).sum(axis=(1, 3))


def block_centres(xp: Any, sums: Any, totals: Any, window: Any, level_per_total: float,
                  origin: tuple[int, int]) -> Any:
    """Disk centre (detector px) of each block-summed pattern (n, h, w) float64, in the
    array module ``xp`` of ``sums`` and ``totals`` (n,) (on a GPU it stays there: the
    caller downloads all blocks' centres at once): the centroid of a ramp of the
    intensity between 25 % and 75 % of the block's disk level (the edge, not the
    interior's object contrast; dark field and hot spots clipped). NaN where nothing
    reaches the ramp. (n, 2)."""
    level = (level_per_total * totals)[:, None, None]
    lo, hi = DISK_RAMP
    with np.errstate(invalid="ignore", divide="ignore"):
        w = sums / level  # in place from here: one temporary of the window data's size
        w -= lo
        w /= hi - lo
        xp.clip(w, 0.0, 1.0, out=w)
        w *= xp.asarray(window)[None]
    h, wd = w.shape[1:]
    r = xp.arange(h, dtype=xp.float64) + origin[0]
    c = xp.arange(wd, dtype=xp.float64) + origin[1]
    mass = w.sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        cr = (w.sum(axis=2) @ r) / mass
        cc = (w.sum(axis=1) @ c) / mass
    # where, not a boolean-mask assignment: no data-dependent size for a GPU to report
    return xp.where((mass > 0)[:, None], xp.stack([cr, cc], axis=1), xp.nan)


def _median_kept(xp: Any, x: Any, keep: Any, n_keep: int) -> Any:
    """The median of ``x[keep]`` (``n_keep`` values) as a 0-d array in ``xp``, as
    np.median computes it (the middle value, or the mean of the two middle values),
    without a boolean selection (whose size a GPU would have to report)."""
    ordered = xp.sort(xp.where(keep, x, xp.inf))
    mid = n_keep // 2
    if n_keep % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2.0


def _normal_equations(xp: Any, A: Any, y: Any, w: Any) -> Any:
    """The weighted least-squares system [AᵀWA | AᵀWy], (n_terms, n_terms + 2) raveled,
    in ``xp``: small, so it is solved on the host (``_solve``). The monomials of
    coordinates in [-1, 1] up to degree 3 are well conditioned (cond(AᵀA) ≲ 10³)."""
    Aw = A * w[:, None]
    return xp.concatenate([Aw.T @ A, Aw.T @ y], axis=1).ravel()


def _solve(system: np.ndarray, n_terms: int) -> np.ndarray:
    s = system.reshape(n_terms, n_terms + 2)
    out: np.ndarray = np.linalg.solve(s[:, :n_terms], s[:, n_terms:])
    return out


def fit_descan(model: str, degree: int, scan_shape: tuple[int, int], positions: np.ndarray,
               centres: Any, weights: np.ndarray, threshold_px: float, block: int,
               grid_shape: tuple[int, int]) -> DescanFit | None:
    """Weighted least squares of the centres on the monomials, refitted twice without
    points beyond 5 robust sigmas. None when too few measurements for the model.
    Runs in the array module of ``centres`` (n, 2) (on a GPU the measurements stay
    there: one small download per refit, the count kept and the next normal equations
    together, and one of the fit and the grid of measurements, ``grid_shape`` blocks,
    at the end)."""
    xp = module_of(centres)
    n_terms = len(terms(degree))
    u, v = normalised_coords(scan_shape, xp.asarray(positions[:, 0]),
                             xp.asarray(positions[:, 1]))
    A = design(u, v, degree)
    w = xp.asarray(weights)
    ok = xp.isfinite(centres).all(axis=1) & (w > 0)
    y = xp.where(ok[:, None], centres, 0.0)  # NaN rows weigh 0 but would poison a product
    first = to_host(xp.concatenate([ok.sum(dtype=xp.float64).reshape(1),
                                    _normal_equations(xp, A, y, w * ok)]),
                    site="preprocess.descan")
    keep, n_keep, system = ok, int(first[0]), first[1:]
    if n_keep < 3 * n_terms:
        return None
    sol: Any = None
    for _ in range(3):  # the fit, then at most two refits without the outliers
        sol = xp.asarray(_solve(system, n_terms))
        resid = xp.sqrt(((y - A @ sol) ** 2).sum(axis=1))
        sigma = 1.4826 * _median_kept(xp, resid, keep, n_keep) + 1e-12
        new = ok & (resid <= 5.0 * sigma + 1e-9)
        packed = to_host(xp.concatenate([
            xp.stack([new.sum(dtype=xp.float64), (new != keep).sum(dtype=xp.float64)]),
            _normal_equations(xp, A, y, w * new)]), site="preprocess.descan")
        n_new, changed = int(packed[0]), int(packed[1])
        if n_new < 3 * n_terms or not changed:
            break
        keep, n_keep, system = new, n_new, packed[2:]
    resid = xp.sqrt(((y - A @ sol) ** 2).sum(axis=1))
    kw = w * keep
    rms = xp.sqrt((resid**2 * kw).sum() / kw.sum())
    var = centre_map(xp, sol.T, scan_shape, degree, variation_only=True)
    span = xp.maximum(xp.ptp(var[..., 0]), xp.ptp(var[..., 1]))
    # Standard error of the span: per-component noise rms/√2, spread over the kept points.
    n_eff = kw.sum() ** 2 / (kw**2).sum()
    coeffs, scalars, grid = download_many(
        [sol.T, xp.stack([rms, span, n_eff]), centres.reshape(*grid_shape, 2)],
        site="preprocess.descan")
    rms_px, span_px, n_eff_h = (float(x) for x in scalars)
    span_error = 2.0 * (rms_px / math.sqrt(2.0)) * math.sqrt(n_terms / n_eff_h) * 2.0
    return DescanFit(model=model, degree=degree, coefficients=coeffs, scan_shape=scan_shape,
                     residual_rms_px=rms_px, span_px=span_px, span_error_px=span_error,
                     threshold_px=float(threshold_px), block=int(block),
                     measured=grid, positions=positions)


def centre_map(xp: Any, coefficients: Any, scan_shape: tuple[int, int], degree: int,
               variation_only: bool = False) -> Any:
    """The fit's centre (or its variation) at every scan position, (Rr, Rc, 2), in
    ``xp`` (``coefficients`` (2, n_terms) in the same module)."""
    nr, nc = scan_shape
    i, j = xp.meshgrid(xp.arange(nr, dtype=xp.float64), xp.arange(nc, dtype=xp.float64),
                       indexing="ij")
    A = design(*normalised_coords(scan_shape, i, j), degree)
    c = coefficients.copy()
    if variation_only:
        c[:, 0] = 0.0
    return A @ c.T

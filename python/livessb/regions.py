"""The one region rule: bounds are four integers inside the scan, at least
``MIN_REGION_PX`` scan positions on each side (stops exclusive). The session,
the widget and the front end (which receives ``MIN_REGION_PX``) all use it."""

from __future__ import annotations

from typing import Any

Bounds = tuple[int, int, int, int]
MIN_REGION_PX = 4  # the joint fit needs a few scan frequencies per axis


class RegionError(ValueError):
    """Region bounds that are empty, too small or outside the scan."""


def check_bounds(bounds: Any, scan_shape: tuple[int, int]) -> Bounds:
    """Validated (row_start, row_stop, col_start, col_stop), stops exclusive."""
    try:
        r0, r1, c0, c1 = (int(x) for x in bounds)
        if any(int(x) != x for x in bounds):
            raise ValueError
    except (TypeError, ValueError):
        raise RegionError(
            f"region bounds must be four integers (row_start, row_stop, col_start, "
            f"col_stop), got {bounds!r}") from None
    rows, cols = scan_shape
    if r1 <= r0 or c1 <= c0:
        raise RegionError(f"region {bounds!r} is empty: stops are exclusive and must "
                          "exceed starts")
    if r0 < 0 or c0 < 0 or r1 > rows or c1 > cols:
        raise RegionError(f"region {bounds!r} lies outside the {rows}x{cols} scan: keep "
                          f"0 ≤ start < stop ≤ ({rows}, {cols})")
    if min(r1 - r0, c1 - c0) < MIN_REGION_PX:
        raise RegionError(f"region {bounds!r} is too small to fit: use at least "
                          f"{MIN_REGION_PX}x{MIN_REGION_PX} scan positions")
    return (r0, r1, c0, c1)


def check_scan_fits(scan_shape: tuple[int, int]) -> None:
    """The full-field fit's version of the rule: any scan loads, only a scan of at
    least ``MIN_REGION_PX`` positions per side can be fitted."""
    rows, cols = (int(n) for n in scan_shape)
    if min(rows, cols) < MIN_REGION_PX:
        raise RegionError(
            f"the {rows}x{cols} scan is too small to fit: the joint fit needs at least "
            f"{MIN_REGION_PX}x{MIN_REGION_PX} scan positions (a few scan frequencies per "
            "axis); load a larger scan (or scan_region) to fit it. The dataset itself "
            "loads and can be inspected at any size")

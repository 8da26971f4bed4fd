"""Host side of the CUDA scoring kernel's recurrent phases (CPU only): where the
recurrences re-anchor, and the per-pixel step they advance by."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from livessb.engine import cuda_kernels as ck
from livessb.physics.geometry import bright_field_pixels, scan_frame_frequencies

if TYPE_CHECKING:
    from livessb.physics.geometry import BFPixels


def _bf() -> BFPixels:
    return bright_field_pixels((96, 96), (47.3, 48.6), 0.02, 0.8)


def test_every_unanchored_pixel_is_its_predecessors_right_neighbour() -> None:
    bf = _bf()
    anchors = ck.recurrence_anchors(bf.rows, bf.cols)
    free = np.flatnonzero(anchors == 0)
    assert free.size > 0.8 * bf.count  # most pixels step, few re-anchor
    assert np.all(free > 0)
    assert np.all(bf.rows[free] == bf.rows[free - 1])
    assert np.all(bf.cols[free] == bf.cols[free - 1] + 1)


def test_anchors_at_row_starts_tile_starts_and_at_most_every_16_pixels() -> None:
    bf = _bf()
    anchors = ck.recurrence_anchors(bf.rows, bf.cols) != 0
    row_start = np.r_[True, bf.rows[1:] != bf.rows[:-1]]
    assert np.all(anchors[row_start])
    assert np.all(anchors[:: ck.BT])  # any tile range of a walk starts on an anchor
    gaps = np.diff(np.flatnonzero(anchors))
    assert gaps.max() <= ck.ANCHOR_PIXELS
    # within a long row run, exactly every ANCHOR_PIXELS-th pixel (tile starts aside)
    run = np.flatnonzero(bf.rows == bf.rows[bf.count // 2])
    inner = anchors[run] & (run % ck.BT != 0)
    assert np.array_equal(np.flatnonzero(inner), np.arange(0, len(run), ck.ANCHOR_PIXELS))


def test_column_step_is_the_step_between_neighbours_in_the_scan_frame() -> None:
    bf = _bf()
    step = ck.column_step(bf.k_det, bf.rows, bf.cols)
    np.testing.assert_allclose(step, [[0.0, 0.02]], rtol=0, atol=1e-15)
    for theta, transpose in ((0.3, False), (2.1, True)):
        k = scan_frame_frequencies(bf.k_det, theta, transpose)
        dk = scan_frame_frequencies(step, theta, transpose)[0]
        free = np.flatnonzero(ck.recurrence_anchors(bf.rows, bf.cols) == 0)
        np.testing.assert_allclose(k[free] - k[free - 1], np.broadcast_to(dk, (free.size, 2)),
                                   rtol=0, atol=1e-14)


def test_isolated_pixels_are_all_anchors() -> None:
    rows, cols = np.array([0, 1, 2]), np.array([5, 5, 5])
    assert np.all(ck.recurrence_anchors(rows, cols) == 1)
    assert np.array_equal(ck.column_step(np.zeros((3, 2)), rows, cols), np.zeros((1, 2)))

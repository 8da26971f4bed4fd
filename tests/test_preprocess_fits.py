"""Full-field fits on the demo with descan, bad pixels and beam-current fluctuation: the
corrections recover what a clean acquisition gives (slow: one demo fit per case)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np
import pytest

import livessb.simulate as sim
from helpers import with_counts
from livessb import Dataset4D, Preprocessing, Session

if TYPE_CHECKING:
    from livessb.results import FitResult
    from livessb.simulate import SimulationTruth

pytestmark = pytest.mark.slow

# Tolerances of the no-descan fit (the demo's own fit is 11.98°, -49.8 Å; truth 12°, -50).
ROTATION_TOL_DEG = 0.3
C10_TOL_A = 1.5
HOT_PIXEL = (20, 26)  # inside the BF disk (centre ≈ (24.3, 23.8), radius 11.5 px)
DEAD_COLUMN = 30


def _descan(span_px: float) -> tuple[float, float, float, float]:
    """A plane with a curl (it biases the COM rotation), each component moving the disk
    by ``span_px`` from one corner of the 96×96 scan to the other."""
    r0, r1, c0, c1 = (v * span_px / 95 for v in (0.3, 0.7, -0.6, 0.4))
    return r0, r1, c0, c1


@functools.lru_cache(maxsize=2)
def _descan_demo(span_px: float) -> Dataset4D:
    return sim.simulate_4dstem(**{**sim.DEMO_SETTINGS, "descan_px_per_px": _descan(span_px)})[0]


def _with_bad_pixels(ds: Dataset4D) -> Dataset4D:
    counts = ds.counts.copy()
    counts[:, :, HOT_PIXEL[0], HOT_PIXEL[1]] = 5000  # ~40× the disk level, every frame
    counts[:, :, :, DEAD_COLUMN] = 0
    return with_counts(ds, counts)


def _assert_like_clean(fit: FitResult, clean: FitResult) -> None:
    assert abs(fit.rotation_deg - clean.rotation_deg) < ROTATION_TOL_DEG
    assert abs(fit.params["C10"] - clean.params["C10"]) < C10_TOL_A


@pytest.mark.parametrize(("span_px", "bad_pixels"),
                         [(1.0, False), (3.0, False), (1.0, True), (3.0, True)])
def test_descan_correction_recovers_rotation_and_C10(
        demo_session: Session, span_px: float, bad_pixels: bool) -> None:
    ds = _descan_demo(span_px)
    if bad_pixels:
        ds = _with_bad_pixels(ds)
    with Session(ds, device="cpu") as s:
        fit = s.fit(progress=False)
        pre = s.preprocessing
        assert s.descan is not None and pre.descan_applied
        assert abs(s.descan.span_px - span_px) < 0.1 * span_px
        assert pre.bad_pixels[HOT_PIXEL] == bad_pixels
        assert pre.bad_pixels[:, DEAD_COLUMN].any() == bad_pixels
    assert demo_session.full_fit is not None
    _assert_like_clean(fit, demo_session.full_fit)


def test_hot_pixel_and_dead_column_do_not_change_the_fit(
        demo_session: Session, demo_with_truth: tuple[Dataset4D, SimulationTruth]) -> None:
    ds = _with_bad_pixels(demo_with_truth[0])
    with Session(ds, device="cpu") as s:
        fit = s.fit(progress=False)
        assert s.preprocessing.found_pixels >= 1 + 20  # the hot pixel and the column's disk part
        assert not s.preprocessing.descan_applied
    assert demo_session.full_fit is not None
    _assert_like_clean(fit, demo_session.full_fit)


def test_dose_normalisation_brings_C10_closer_to_truth() -> None:
    ds, truth = sim.simulate_4dstem(**{**sim.DEMO_SETTINGS, "beam_current_fluctuation": 0.2})
    errors = []
    for normalise in (False, True):
        with Session(ds, device="cpu", preprocessing=Preprocessing(dose_normalise=normalise)) as s:
            errors.append(abs(s.fit(progress=False).params["C10"] - truth.params["C10"]))
            assert (s.preprocessing.dose_factors is not None) == normalise
    assert errors[1] < errors[0]
    assert np.isfinite(errors).all()


def test_a_single_saturated_count_does_not_change_the_fit(
        demo_session: Session, demo_with_truth: tuple[Dataset4D, SimulationTruth]) -> None:
    # One count of 65535 in one frame of one BF pixel (~500× its level: an X-ray hit, a
    # saturated read) turned the rotation by 3° while the bad-pixel search, which reads
    # the mean pattern, saw nothing; the engines now replace it (engine.spikes).
    ds = demo_with_truth[0]
    counts = ds.counts.copy()
    counts[40, 50, HOT_PIXEL[0], HOT_PIXEL[1]] = 65535
    with Session(with_counts(ds, counts), device="cpu") as s:
        fit = s.fit(progress=False)
        assert s.diagnostics.spikes_repaired == 1
        assert s.preprocessing.found_pixels == 0  # not a bad pixel: one frame
    assert demo_session.full_fit is not None
    _assert_like_clean(fit, demo_session.full_fit)

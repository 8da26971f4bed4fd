"""A per-bin region fit of a crystal window of few lattice periods advises crystal mode
(fit.periods_advice): its C10 can be several % off there with errors that do not cover
it (docs/bias-matrix.md §12, §20; tests/test_region_coverage.py's strict xfail)."""

from __future__ import annotations

import numpy as np
import pytest

import livessb
from livessb import Session
from livessb.cli_text import fit_lines
from livessb.fit.periods_advice import FEW_PERIODS, advice_of
from livessb.simulate.demo import demo_dataset
from livessb.widget.records import trust_record


@pytest.fixture(scope="module")
def demo() -> livessb.Dataset4D:
    return demo_dataset()


def test_a_small_crystal_region_advises_crystal_mode_and_a_wide_one_not(
        demo: livessb.Dataset4D) -> None:
    # The demo's crystal: 3.905 Å at 0.6 Å steps; 16² spans 2.46 periods, 48² 7.4.
    with Session(demo, device="cpu") as s:
        full = s.fit(trials=60, seed=1, progress=False)
        assert not advice_of(full.provenance["warnings"])  # a full field is not a region
        # 12² (1.8 periods) first: too few periods to tell a crystal, so no verdict and no
        # advice yet (a narrow window's test once made the scan "no crystal" for good)
        narrow = s.fit_region((40, 52, 40, 52), trials=60, seed=1).fit
        assert not advice_of(narrow.provenance["warnings"])
        small = s.fit_region((40, 56, 40, 56), trials=60, seed=1).fit
        narrow = s.fit_region((40, 52, 40, 52), trials=60, seed=1).fit  # now a crystal's
        assert "draw it over 2.4 periods or more" in advice_of(narrow.provenance["warnings"])[0]
        wide = s.fit_region((24, 72, 24, 72), trials=60, seed=1).fit
        crystal = s.fit_region((40, 56, 40, 56), trials=60, seed=1, object_model="lattice").fit
    advice = advice_of(small.provenance["warnings"])
    assert len(advice) == 1, small.provenance["warnings"]
    assert "16×16-position window spans 2.5 periods of the scan's 3.9" in advice[0], advice
    assert 'object_model="lattice"' in advice[0]
    few = small.provenance["few_periods"]  # its numbers: the truth's lattice, 16 × 0.6 Å
    assert few["window"] == [16, 16] and few["period_A"] == pytest.approx(3.905, rel=0.01)
    assert few["periods"] == pytest.approx(16 * 0.6 / 3.905, rel=0.01)
    assert not advice_of(wide.provenance["warnings"])
    assert crystal.lattice["model"] == "lattice"  # crystal mode ran: nothing to advise
    assert not advice_of(crystal.provenance["warnings"])
    # what a person sees: the CLI's summary and the widget's region panel
    assert f"  advice: {advice[0]}" in fit_lines("region", small)
    assert trust_record(small)["crystal"] == (
        "few lattice periods: this 16×16 window spans 2.5 periods of the 3.91 Å lattice, "
        "where the per-bin C10 can be several % off: tick crystal")
    assert trust_record(wide)["crystal"] == ""


def test_no_advice_where_the_scan_is_no_crystal(demo: livessb.Dataset4D) -> None:
    # The demo's patterns at shuffled positions: the power spectrum's peaks still give a
    # "lattice", which crystal mode's test rejects (no crystal: no advice).
    counts = np.asarray(demo.counts)
    order = np.random.default_rng(0).permutation(counts.shape[0] * counts.shape[1])
    shuffled = livessb.Dataset4D(
        counts.reshape(-1, *counts.shape[2:])[order].reshape(counts.shape),
        voltage_kV=demo.voltage_kV, semiangle_mrad=demo.semiangle_mrad,
        scan_step_A=demo.scan_step_A, detector_sampling_mrad=demo.detector_sampling_mrad)
    with Session(shuffled, device="cpu") as s:
        s.fit(trials=30, seed=1, progress=False)
        fit = s.fit_region((40, 56, 40, 56), trials=30, seed=1).fit
    assert not [w for w in fit.provenance["warnings"] if w.startswith(FEW_PERIODS)]

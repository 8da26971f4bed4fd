"""Small regions against the simulator's truth (docs/bias-matrix.md §12).

A 16² region of the demo dataset (0.6 Å steps: 9.6 Å, about 2.5 lattice periods) leaks
each Bragg peak into its neighbours' bins and aliases (Nyquist below the BF band). On
nine such regions spread over the scan (their truth C10 from −82 to −18 Å: the demo's
defocus gradient) the default fits read |C10| low by a mean 1.7 Å with errors of ±0.7 Å:
4 of 9 within two errors. Noise-free the same bias is there (+2.0 / +2.5 Å on two of
them), so it is the model's, not the dose's. The Hann window removes most of it (noise-
free −0.2 / +0.8 Å) and its errors cover the rest: 9 of 9.
"""

from __future__ import annotations

from typing import Any

import pytest

from livessb import Session
from livessb.simulate.demo import demo_dataset

REGIONS_16 = [(r, r + 16, c, c + 16) for r in (0, 40, 80) for c in (0, 40, 80)]


def _within_two_errors(**settings: Any) -> dict[str, int]:
    """Of the nine 16² regions, how many have C10 and C12 within two errors of the truth."""
    ds, truth = demo_dataset(with_truth=True)
    within = {"C10": 0, "C12": 0}
    with Session(ds, device="cpu", **settings) as s:
        s.fit(trials=200, seed=1)
        for bounds in REGIONS_16:
            fit = s.fit_region(bounds, trials=200, seed=1).fit
            true = truth.local_params(bounds)
            for name in within:
                within[name] += abs(fit.params[name] - true[name]) <= 2 * fit.errors[name]
    return within


def test_hann_fits_of_regions_of_two_and_a_half_lattice_periods_cover_their_truth() -> None:
    # Measured: C10 9 of 9, C12 9 of 9 (mean z of C10 +0.6; errors about 2.4x the default's).
    within = _within_two_errors(scan_window="hann")
    assert within["C10"] >= 8 and within["C12"] >= 8, within


@pytest.mark.xfail(strict=True, reason=(
    "issue 20, docs/bias-matrix.md §12: the default (unapodised, aliases kept) fits of 16² "
    "regions read |C10| 1.7 Å low on average and their errors do not cover it (4 of 9)"))
def test_default_fits_of_regions_of_two_and_a_half_lattice_periods_cover_their_truth() -> None:
    within = _within_two_errors()
    assert within["C10"] >= 8, within

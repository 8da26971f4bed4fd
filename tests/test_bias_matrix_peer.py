"""scripts/bias_matrix_peer.py's comparison table: each side's Δ against the same truth,
phi12 on its circle of period π, and the count of cases within issue 20's C10 target."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from bias_matrix_peer import peer_table


def _ours(case: str, truth: dict[str, float], delta: dict[str, float]) -> dict[str, Any]:
    return {"case": case, "thickness_A": 4.0, "fit_s": 1.5,
            **{p: {"truth": truth[p], "delta": delta[p]} for p in truth}}


def test_the_table_compares_both_fits_with_the_same_truth_and_counts_the_target() -> None:
    truth = {"C10": -80.0, "C12": 5.0, "phi12": 0.3}
    ours = [_ours("a", truth, {"C10": 0.3, "C12": -0.1, "phi12": 0.002}),
            _ours("b", {**truth, "phi12": 1.5}, {"C10": -1.0, "C12": 0.2, "phi12": 0.0}),
            _ours("not run by the peer", truth, {"C10": 0.0, "C12": 0.0, "phi12": 0.0})]
    # b's peer phi12 lies across the ±π/2 seam from its truth 1.5: 0.12 rad off, not π - 0.12
    peer = [{"case": "a", "tool": "quantem 0.1.10", "trials": 200, "fit_s": 70.0,
             "fit": {"C10": -81.2, "C12": 5.4, "phi12": 0.31}},
            {"case": "b", "tool": "quantem 0.1.10", "trials": 200, "fit_s": 71.0,
             "fit": {"C10": -80.5, "C12": 4.9, "phi12": -math.pi / 2 + 0.05}}]
    text = peer_table(ours, peer)
    rows = [line for line in text.splitlines() if line.startswith("| a |")
            or line.startswith("| b |")]
    assert len(rows) == 2 and "not run by the peer" not in text
    a, b = (r.split(" | ") for r in rows)
    assert a[3] == "+0.30 ✓ / -1.20 ✗"  # target 0.80 Å at C10 -80
    assert a[4] == "-0.10 / +0.40" and a[5] == "+2.00 / +10.00"
    assert b[3] == "-1.00 ✗ / -0.50 ✓"
    assert b[5] == "+0.00 / +120.80"  # π/2 - 1.45 rad: the short way round, not -3.02
    assert "ours 1/2, quantem 0.1.10 1/2" in text


def test_a_negative_c12_is_the_same_aberration_turned_by_a_quarter() -> None:
    truth = {"C10": -80.0, "C12": 5.0, "phi12": 0.3}
    ours = [_ours("a", truth, {"C10": 0.3, "C12": -0.1, "phi12": 0.002})]
    peer = [{"case": "a", "tool": "quantem 0.1.10", "trials": 200, "fit_s": 70.0,
             "fit": {"C10": -80.0, "C12": -5.2, "phi12": 0.3 - math.pi / 2 + 0.01}}]
    row = next(line for line in peer_table(ours, peer).splitlines()
               if line.startswith("| a |")).split(" | ")
    assert row[4] == "-0.10 / +0.20" and row[5] == "+2.00 / +10.00"


def test_no_common_case_gives_no_table() -> None:
    truth = {"C10": -80.0, "C12": 5.0, "phi12": 0.3}
    ours = [_ours("a", truth, {"C10": 0.3, "C12": -0.1, "phi12": 0.002})]
    assert peer_table(ours, []) == ""

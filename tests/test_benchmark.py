"""The benchmark runner end to end on a tiny CPU workload, its CLI and the diagnostics."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

import livessb
from livessb.bench.runner import parser
from livessb.bench.workload import REGIONS, TARGETS_S, random_candidates, scaled_regions
from livessb.cli import main
from livessb.params import DEFAULT_BOX, JOINT

SCAN, DETECTOR, RUNS, TRIALS = (24, 24), (32, 32), 2, 24


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("bench") / "cpu.json"
    code = main(["benchmark", "--json", str(out), "--scan", *map(str, SCAN),
                 "--detector", *map(str, DETECTOR), "--runs", str(RUNS), "--trials",
                 str(TRIALS), "--seed", "3", "--device", "cpu"])
    assert code == 0
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


def test_cpu_run_times_every_operation_of_the_workload(record: dict[str, Any]) -> None:
    assert record["workload"] == {"scan": list(SCAN), "detector": list(DETECTOR),
                                  "dtype": "uint16", "runs": RUNS, "trials": TRIALS,
                                  "seed": 3, "engine": "cpu"}
    ops = ["open", "fit_full_both_branches", "reconstruct_auto", *REGIONS, "close"]
    assert list(record["times_s"]) == ops
    for op in ops:
        t = record["times_s"][op]
        assert len(t["all"]) == RUNS and all(v > 0 for v in t["all"])
        assert t["first"] == t["all"][0] and t["warm_median"] == np.median(t["all"][1:])
    assert set(record["vs_target"]) == set(TARGETS_S)
    assert len(record["stages"]) == len(record["memory"]) == len(record["fits"]) == RUNS
    assert record["stages"][0]["evaluations"] > TRIALS
    assert "parity" not in record and "candidate_timing" not in record  # CUDA only


def test_cpu_run_is_deterministic_and_finds_the_simulated_defocus(
        record: dict[str, Any]) -> None:
    assert record["fits_identical_across_runs"] and record["reconstruction_hashes_identical"]
    truth = record["truth"]
    assert list(truth) == list(JOINT)
    full = record["fits"][0]["full"]
    assert abs(full["params"]["C10"] - truth["C10"]) < 15
    assert abs(full["rotation_deg"] % 180 - record["dataset"]["rotation_deg"] % 180) < 3
    assert record["fit_full_both_branches_searched"]["params"]
    # Each region is scored against the defocus the simulator put at its centre.
    gr, gc = record["dataset"]["defocus_gradient"]
    for name, bounds in record["regions"].items():
        r0, r1, c0, c1 = bounds
        centre = (0.5 * (r0 + r1 - 1) - 0.5 * (SCAN[0] - 1),
                  0.5 * (c0 + c1 - 1) - 0.5 * (SCAN[1] - 1))
        expected = truth["C10"] + gr * centre[0] + gc * centre[1]
        assert record["fits"][0]["regions"][name]["truth_C10"] == pytest.approx(expected)


def test_record_counts_the_bright_field_the_engine_keeps(record: dict[str, Any]) -> None:
    r = record["dataset"]["bf_radius_px"]
    assert 0.8 * math.pi * r**2 < record["dataset"]["n_bf"] < 1.2 * math.pi * r**2


def test_scaled_regions_are_the_reference_at_512_and_stay_inside_smaller_scans() -> None:
    assert scaled_regions((512, 512)) == REGIONS
    for name, (r0, r1, c0, c1) in scaled_regions(SCAN).items():
        assert 0 <= r0 < r1 <= SCAN[0] and 0 <= c0 < c1 <= SCAN[1], name
        assert r1 - r0 >= 4 and c1 - c0 >= 4


def test_timing_candidates_span_the_default_box() -> None:
    cand = random_candidates(np.random.default_rng(0), 4000)
    assert cand.shape == (4000, len(JOINT))
    for j, name in enumerate(JOINT):
        lo, hi = DEFAULT_BOX[name]
        assert lo <= cand[:, j].min() < lo + 0.01 * (hi - lo)
        assert hi - 0.01 * (hi - lo) < cand[:, j].max() <= hi


def test_runner_options_match_the_cli() -> None:
    a = parser().parse_args(["--json", "x.json"])
    assert (a.scan, a.detector, a.dtype, a.runs, a.trials, a.seed, a.device, a.no_parity) == (
        (512, 512), (192, 192), "uint16", 6, 200, 42, "cuda", False)
    with pytest.raises(SystemExit):
        parser().parse_args(["--json", "x.json", "--dtype", "int7"])


def test_diagnostics_evaluate_the_full_field_like_the_fit(
        demo_session: livessb.Session) -> None:
    diag = demo_session.diagnostics
    fit = demo_session.full_fit
    assert fit is not None and diag.engine_name == "cpu"
    best = np.array([[fit.params[n] for n in JOINT]])
    worse = best + np.array([[150.0, 0, 0, 0, 0, 0]])
    losses = diag.evaluate_full(np.vstack([best, worse]))
    assert losses[0] == pytest.approx(fit.loss, rel=1e-9) and losses[0] < losses[1]
    loss, grad, hess = diag.derivatives_full(best)
    assert loss[0] == pytest.approx(losses[0], rel=1e-9)
    assert grad.shape == (1, len(JOINT)) and hess.shape == (1, len(JOINT), len(JOINT))
    assert diag.full_spectra in diag.prepared_spectra and diag.stats == {}
    assert diag.n_bf == diag.bf_counts.shape[2]


def test_diagnostics_refuse_a_closed_session(demo_with_truth: Any) -> None:
    s = livessb.Session(demo_with_truth[0], device="cpu")
    with pytest.raises(RuntimeError, match="fit"):
        _ = s.diagnostics.full_spectra
    s.close()
    with pytest.raises(RuntimeError, match="closed"):
        _ = s.diagnostics

"""Crystal mode from the widget (``object_model`` trait, the toolbar's "crystal mode"
box): regions fitted with the lattice model, refitted when it is switched, what it did in
each region's record, kept through a calibration; against the demo crystal's truth."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import importable, require
from widget_messages import Sent, region

require(importable("anywidget"), "pip install anywidget")

import livessb  # noqa: E402
from livessb.simulate.demo import demo_dataset  # noqa: E402

TIMEOUT = 600
BOUNDS = (40, 56, 40, 56)  # 16², 2.5 lattice periods: where the per-bin model reads |C10| low


def test_crystal_mode_fits_regions_with_the_lattice_and_is_kept_in_the_calibration(
        tmp_path: Path) -> None:
    ds, truth = demo_dataset(with_truth=True)
    true_c10 = truth.local_params(BOUNDS)["C10"]
    w = livessb.SSBWidget(ds, trials=200, seed=1)
    try:
        w.wait(TIMEOUT)
        assert w.status == "done", w.message
        w.regions = [region("r1", *BOUNDS)]
        w.wait(TIMEOUT)
        per_bin = dict(w.region_results["r1"])
        assert per_bin["status"] == "done"
        # the per-bin fit of 2.5 periods advises the box (fit.periods_advice)
        assert per_bin["crystal"].startswith(
            "few lattice periods: this 16×16 window spans 2.5 periods"), per_bin
        sent = Sent(w)
        steps: list[str] = []
        w.observe(lambda change: steps.append(change["new"].get("r1", {}).get("step", "")),
                  names="region_results")
        w.object_model = "lattice"  # the box ticked: every region fitted again
        w.wait(TIMEOUT)
        crystal = w.region_results["r1"]
        assert crystal["status"] == "done", crystal
        # the panel said which of crystal mode's steps ran (seconds each on a CPU)
        said = [t for i, t in enumerate(steps) if t and (i == 0 or steps[i - 1] != t)]
        assert said == [f"crystal mode {k}/5" for k in range(6)], steps
        assert crystal["step"] == ""
        assert crystal["crystal"].startswith("lattice model, periods"), crystal["crystal"]
        assert w.session.regions["r1"].fit.lattice["model"] == "lattice"
        assert len(sent.crops("r1")) == 1  # its crop painted again
        # measured: per bin +2.94 ± 0.69 Å, crystal mode +0.54 ± 0.45 Å from the truth
        d_per_bin = per_bin["params"]["C10"] - true_c10
        d_crystal = crystal["params"]["C10"] - true_c10
        assert abs(d_crystal) < 1.0 and abs(d_crystal) <= 2 * crystal["errors"]["C10"], crystal
        assert abs(d_crystal) < abs(d_per_bin) - 1.0, (d_crystal, d_per_bin)

        path = w.save_calibration(tmp_path / "crystal.json")
        w2 = livessb.SSBWidget(ds, calibration=path, fit=False)
        try:
            w2.wait(TIMEOUT)
            assert w2.session.evaluations == 0  # nothing refitted
            assert w2.object_model == "lattice"  # the box as the regions were fitted
            assert w2.region_results["r1"]["crystal"] == crystal["crystal"]
            assert w2.region_results["r1"]["params"] == crystal["params"]
        finally:
            w2.close()

        w.object_model = "per_bin"  # unticked: back to the per-bin fit
        w.wait(TIMEOUT)
        assert w.region_results["r1"]["crystal"] == per_bin["crystal"]  # the advice again
        assert w.region_results["r1"]["params"]["C10"] == pytest.approx(
            per_bin["params"]["C10"], abs=1e-9)
    finally:
        w.close()


def test_an_unknown_object_model_is_refused_and_the_fits_kept() -> None:
    ds = demo_dataset()
    w = livessb.SSBWidget(ds, fit=False)
    try:
        with pytest.raises(Exception, match="per_bin"):
            w.object_model = "crystal"
        assert w.object_model == "per_bin"
    finally:
        w.close()

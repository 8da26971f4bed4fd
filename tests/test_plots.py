"""Matplotlib figures (Agg): phase with scale bar, trials, loss slices, BF/COM diagnostics."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.patches import Circle, Rectangle
from matplotlib.quiver import Quiver

from livessb import Dataset4D
from livessb.params import JOINT
from livessb.plots import (
    loss_slices,
    nice_length,
    plot_bright_field,
    plot_loss_slices,
    plot_phase,
    plot_trials,
    rotated_com,
    scale_bar_length,
)
from livessb.results import FitResult, Reconstruction

PARAMS = {"C10": 20.0, "C12": 5.0, "phi12": 0.3, "tilt_row_mrad": 1.0, "tilt_col_mrad": -2.0,
          "depth": 40.0}


@pytest.fixture
def fit() -> FitResult:
    rng = np.random.default_rng(0)
    trials = [{"number": i, "batch": i // 20, "branch": i % 2,
               "params": dict(PARAMS), "loss": float(rng.uniform(0.2, 1.0))}
              for i in range(40)]
    newton = [{"start": 0, "iteration": i, "params": dict(PARAMS), "loss": 0.2 - 0.01 * i,
               "accepted": i != 2} for i in range(4)]
    return FitResult(params=dict(PARAMS), loss=0.17, rotation_deg=12.0, transpose=False,
                     trials=trials, newton=newton,
                     provenance={"box": {"C10": [-500, 500], "C12": [0, 100],
                                         "phi12": [-math.pi / 2, math.pi / 2],
                                         "tilt_row_mrad": [-15, 15],
                                         "tilt_col_mrad": [-15, 15], "depth": [0, 500]}})


def test_scale_bar_lengths() -> None:
    assert nice_length(37) == 20 and nice_length(0.7) == 0.5 and nice_length(1) == 1
    assert scale_bar_length(250.0) == (50.0, "5 nm")
    assert scale_bar_length(30.0) == (5.0, "5 Å")
    with pytest.raises(ValueError):
        nice_length(0)


@pytest.mark.parametrize("sampling,label", [((0.2, 0.2), "2 Å"), ((2.0, 2.0), "2 nm")])
def test_plot_phase_scale_bar(tmp_path: Path, sampling: tuple[float, float],
                              label: str) -> None:
    rng = np.random.default_rng(1)
    rec = Reconstruction(object=np.exp(1j * rng.normal(0, 0.3, (64, 64))).astype(np.complex64),
                         params=dict(PARAMS), upsample=1, sampling_A=sampling)
    fig = rec.plot()
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts] == [label]
    bars = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert len(bars) == 1
    length_A = float(label.split()[0]) * (10 if label.endswith("nm") else 1)
    assert bars[0].get_width() == pytest.approx(length_A / sampling[1])
    fig.savefig(tmp_path / "phase.png")
    fig2 = plot_phase(rec, scale_bar=False)
    assert not fig2.axes[0].texts


def test_plot_phase_into_given_axes() -> None:
    fig = Figure()
    ax = fig.add_subplot()
    rec = Reconstruction(object=np.ones((8, 8), np.complex64), params={}, upsample=1,
                         sampling_A=(1.0, 1.0))
    assert plot_phase(rec, ax=ax) is fig


def test_plot_trials(fit: FitResult, tmp_path: Path) -> None:
    fig = plot_trials(fit)
    ax = fig.axes[0]
    scatters = [c for c in ax.collections if isinstance(c, PathCollection)]
    sizes = sorted(len(np.asarray(c.get_offsets())) for c in scatters)
    assert sizes == [1, 3, 20, 20]  # two branches, accepted and rejected Newton steps
    best = ax.lines[0].get_ydata()
    assert np.all(np.diff(best) <= 0)
    labels = ax.get_legend_handles_labels()[1]
    assert "best so far" in labels and "Newton step (accepted)" in labels
    fig.savefig(tmp_path / "trials.png")


def test_loss_slices_one_batch_call(fit: FitResult, tmp_path: Path) -> None:
    centre = np.array([PARAMS[k] for k in JOINT])
    calls: list[tuple[int, ...]] = []

    def evaluate(batch: np.ndarray) -> np.ndarray:
        calls.append(batch.shape)
        return 0.17 + (((batch - centre) / np.array([50, 10, 0.5, 3, 3, 30])) ** 2).sum(axis=1)

    slices = loss_slices(fit, evaluate, points=21)
    assert calls == [(6 * 21, 6)]
    for i, k in enumerate(JOINT):
        x, y = slices[k]
        assert x[np.argmin(y)] == pytest.approx(centre[i], abs=(x[1] - x[0]))
    assert slices["C10"][0][-1] - slices["C10"][0][0] == pytest.approx(200)  # 10 % of box
    assert slices["C12"][0][0] == 0.0  # non-negative parameters are clipped
    fig = plot_loss_slices(fit, evaluate, span={"C10": 10.0})
    assert len(fig.axes) == 6
    assert fig.axes[0].get_xlabel() == "C10 (Å)"
    assert np.asarray(fig.axes[0].lines[0].get_xdata())[-1] == pytest.approx(30.0)
    fig.savefig(tmp_path / "slices.png")
    with pytest.raises(ValueError, match="losses"):
        loss_slices(fit, lambda b: np.zeros(3))
    with pytest.raises(ValueError, match="unknown parameters"):
        loss_slices(fit, evaluate, span={"C30": 1.0})


def test_rotated_com() -> None:
    v = np.array([1.0, 0.0])
    np.testing.assert_allclose(rotated_com(v, 90.0, False), [0.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(rotated_com(v, 0.0, True), [0.0, 1.0], atol=1e-12)


def test_plot_bright_field(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    y, x = np.mgrid[:24, :24]
    counts = np.zeros((8, 8, 24, 24), np.uint16)
    for r in range(8):
        for c in range(8):
            dy, dx = 0.5 * math.sin(r), 0.5 * math.cos(c)  # a COM field to draw
            disk = (y - 11.5 - dy) ** 2 + (x - 11.5 - dx) ** 2 <= 25
            counts[r, c] = disk * rng.poisson(200, (24, 24))
    ds = Dataset4D(counts, voltage_kV=200, semiangle_mrad=20, scan_step_A=0.5)
    fig = plot_bright_field(ds, rotation_deg=30.0, transpose=True)
    assert len(fig.axes) >= 2
    circles = [p for p in fig.axes[0].patches if isinstance(p, Circle)]
    assert len(circles) == 1
    assert circles[0].get_radius() == pytest.approx(20 / ds.detector_sampling_mrad)
    quivers = [c for c in fig.axes[1].collections if isinstance(c, Quiver)]
    assert len(quivers) == 1 and quivers[0].N == 64
    assert "30.0°" in fig.axes[1].get_title() and "transpose" in fig.axes[1].get_title()
    fig.savefig(tmp_path / "bf.png")
    with pytest.raises(ValueError, match="com must have shape"):
        plot_bright_field(ds, 0.0, False, com=np.zeros((3, 3, 2)))
    given: Any = np.zeros((8, 8, 2))
    plot_bright_field(ds, 0.0, False, com=given)

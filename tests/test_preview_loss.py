"""The loss shown beside a steered frame is the loss of the image on screen: higher-order
coefficients (C21, C23, C30, …) included, checked against the torch rebuild of the VP
loss (tests/vp_reference.py) and against the simulator's truth, and through the widget's
preview messages (whose loss cache once keyed on the six joint parameters only)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pytest
import torch

from helpers import importable, require
from livessb import Session
from livessb.params import JOINT
from livessb.preview import loss_names, params_loss, render_preview
from livessb.simulate import simulate_4dstem
from vp_reference import torch_loss_args, torch_vp_loss

if TYPE_CHECKING:
    from livessb import Dataset4D
    from livessb.simulate import SimulationTruth

C30_TRUE_A = 1.5e5  # 15 µm: ≈ 1.5 rad of χ at the 20 mrad aperture edge (200 kV)
TRUTH = {"C10": -40.0, "C12": 10.0, "phi12": 0.3, "tilt_row_mrad": 0.0, "tilt_col_mrad": 0.0,
         "depth": 0.0}


@pytest.fixture(scope="module")
def sim() -> tuple[Dataset4D, SimulationTruth]:
    return simulate_4dstem(scan_shape=(24, 24), detector_shape=(32, 32), dose=2e5, seed=11,
                           aberrations={"C10": -40.0, "C12": 10.0, "phi12": 0.3,
                                        "C30": C30_TRUE_A})


@pytest.fixture(scope="module")
def session(sim: tuple[Dataset4D, SimulationTruth]) -> Iterator[Session]:
    ds, truth = sim
    s = Session(ds, device="cpu")
    s.rotation_deg, s.transpose = truth.rotation_deg, truth.transpose  # the simulator's
    yield s
    s.close()


def _reference_loss(session: Session, ds: Dataset4D, params: dict[str, float]) -> float:
    """torch_vp_loss on the session's own full-field spectra (at its rotation)."""
    spectra = session.diagnostics.full_model.spectra  # type: ignore[union-attr]
    names = tuple(params)
    theta = torch.tensor([params[n] for n in names])
    return float(torch_vp_loss(theta, *torch_loss_args(ds, spectra), names=names).item())


@pytest.mark.parametrize("extra", [
    {"C30": 2e5},
    {"C21": 300.0, "phi21": 0.7, "C23": 200.0, "phi23": -0.4, "C30": -3e4},
])
def test_frame_loss_includes_higher_orders_as_the_reference_computes(
        session: Session, sim: tuple[Dataset4D, SimulationTruth],
        extra: dict[str, float]) -> None:
    ds, _ = sim
    params = {**TRUTH, **extra}
    frame = render_preview(session, params)
    want = _reference_loss(session, ds, params)
    assert frame.loss == pytest.approx(want, rel=1e-9)
    six = render_preview(session, TRUTH).loss
    assert six == pytest.approx(_reference_loss(session, ds, dict(TRUTH)), rel=1e-9)
    assert abs(frame.loss - six) > 1e-3  # the higher orders change what is explained
    assert loss_names(params) == JOINT + tuple(extra)


def test_loss_is_lowest_at_the_simulated_spherical_aberration(session: Session) -> None:
    """Known truth: over a C30 grid the loss of what is reconstructed is least at the
    simulator's C30 (the six joint parameters held at their true values)."""
    grid = [0.0, 0.5 * C30_TRUE_A, C30_TRUE_A, 1.5 * C30_TRUE_A, 2.0 * C30_TRUE_A]
    losses = [params_loss(session, {**TRUTH, "C30": c30}) for c30 in grid]
    assert int(np.argmin(losses)) == 2, losses
    assert losses[0] - losses[2] > 1e-3, losses  # not a tie within the noise


def test_zero_higher_orders_stay_on_the_six_parameter_path(session: Session) -> None:
    params = {**TRUTH, "C30": 0.0, "C21": 0.0, "phi21": 0.4}
    assert loss_names(params) == JOINT
    assert params_loss(session, params) == params_loss(session, TRUTH)


def test_widget_frame_loss_follows_a_higher_order_slider(session: Session) -> None:
    """Same six joint parameters, C30 set then cleared: each frame's loss is its own."""
    require(importable("anywidget"), "pip install anywidget")
    from livessb import SSBWidget
    from livessb.widget.bundle import _STATIC
    from widget_messages import Sent

    require((_STATIC / "widget.js").is_file(), "front end not built (npm run build)")
    w = SSBWidget(session, fit=False)
    try:
        sent = Sent(w)
        w.wait(300)
        for seq, c30 in ((1, 0.0), (2, 2e5), (3, 0.0)):
            msg = {"type": "preview", "seq": seq, "params": {**TRUTH, "C30": c30},
                   "view": "phase"}
            w._on_custom_msg(w, msg, [])
            w.wait(300)
        losses = [c["loss"] for c, _ in sent.of("frame")]
        assert len(losses) == 3, w.message
        assert losses[1] == pytest.approx(params_loss(session, {**TRUTH, "C30": 2e5}))
        assert losses[0] == losses[2] == params_loss(session, TRUTH)
        assert abs(losses[1] - losses[0]) > 1e-3  # the cached six-parameter loss is not reused
    finally:
        w.close()

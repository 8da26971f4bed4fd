"""Virtual images (livessb.virtual) against known truth, and the widget showing them
before and during its first fit (the ``image`` and ``virtual_images`` traits)."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pytest

import livessb
from livessb import virtual
from livessb.physics.geometry import center_of_mass
from livessb.simulate import simulate_4dstem
from livessb.xp import counting

if TYPE_CHECKING:
    from livessb import Dataset4D
    from livessb.simulate import SimulationTruth

TIMEOUT = 300


@pytest.fixture(scope="module")
def demo() -> tuple[Dataset4D, SimulationTruth]:
    return livessb.simulate.demo_dataset(with_truth=True)


def true_phase(truth: SimulationTruth) -> np.ndarray:
    nr, nc = truth.scan_shape
    rows, cols = np.meshgrid(np.arange(nr) * truth.scan_step_A[0],
                             np.arange(nc) * truth.scan_step_A[1], indexing="ij")
    out: np.ndarray = truth.phase(rows, cols)
    return out


def corr(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(a.ravel(), b.ravel())[0, 1])


def disk_mask(ds: Dataset4D) -> np.ndarray:
    bf = ds.bright_field
    r, c = np.meshgrid(np.arange(ds.detector_shape[0]), np.arange(ds.detector_shape[1]),
                       indexing="ij")
    out: np.ndarray = (r - bf.center_row) ** 2 + (c - bf.center_col) ** 2 <= bf.radius_px**2
    return out


class WrappedCounts:
    """Counts behind a ``device_array`` attribute, read by slicing (the DeviceCounts
    API, here over host memory: module_of sees NumPy)."""

    def __init__(self, array: np.ndarray) -> None:
        self.device_array = array
        self.shape = array.shape
        self.dtype = array.dtype

    def __getitem__(self, index: Any) -> np.ndarray:
        return np.asarray(self.device_array[index])


# ------------------------------------------------------------------ the reductions

def test_bf_and_adf_are_the_counts_inside_and_outside_the_disk(
        demo: tuple[Dataset4D, SimulationTruth]) -> None:
    ds, _ = demo
    sums = virtual.detector_sums(ds.counts, (ds.bright_field.center_row,
                                             ds.bright_field.center_col),
                                 ds.bright_field.radius_px)
    inside = disk_mask(ds)
    counts = ds.counts.astype(np.float64)
    np.testing.assert_array_equal(sums.bf, counts[:, :, inside].sum(-1))  # float64: exact
    np.testing.assert_array_equal(sums.adf, counts[:, :, ~inside].sum(-1))
    np.testing.assert_array_equal(sums.total, counts.sum(axis=(2, 3)))
    com = center_of_mass(ds.counts, (ds.bright_field.center_row, ds.bright_field.center_col))
    np.testing.assert_allclose(sums.com_px, com, rtol=0, atol=1e-9)


def test_round_trips_do_not_grow_with_the_chunks(demo: tuple[Dataset4D, SimulationTruth],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of one scan row: the pass stays where the counts are, and the images come
    back in one transfer (plus the COM field for the rotation estimate before a fit):
    what a GPU would wait for, counted by livessb.xp."""
    ds, truth = demo
    bf = ds.bright_field
    args = ((bf.center_row, bf.center_col), bf.radius_px)
    whole = virtual.detector_sums(ds.counts, *args)
    monkeypatch.setattr(virtual, "HOST_CHUNK_BYTES", 1)
    with counting() as count:
        rowwise = virtual.detector_sums(ds.counts, *args)
    assert count.round_trips == 0, dict(count)
    with counting() as count:
        virtual.virtual_images(ds, sums=rowwise)
    assert count.round_trips == 2, dict(count)
    with counting() as count:
        virtual.virtual_images(ds, truth.rotation_deg, truth.transpose, sums=rowwise)
    assert count.round_trips == 1, dict(count)
    np.testing.assert_array_equal(rowwise.bf, whole.bf)
    np.testing.assert_array_equal(rowwise.adf, whole.adf)
    np.testing.assert_allclose(rowwise.com_px, whole.com_px, rtol=0, atol=1e-12)


def test_same_images_from_an_array_a_wrapper_and_a_memory_map(
        demo: tuple[Dataset4D, SimulationTruth], tmp_path: Path) -> None:
    ds, _ = demo
    bf = ds.bright_field
    args = ((bf.center_row, bf.center_col), bf.radius_px)
    ref = virtual.detector_sums(ds.counts, *args)
    np.save(tmp_path / "counts.npy", ds.counts)
    mapped = np.load(tmp_path / "counts.npy", mmap_mode="r")
    for counts in (WrappedCounts(ds.counts), mapped):
        got = virtual.detector_sums(counts, *args)
        for name in ("bf", "adf", "com_px"):
            assert np.array_equal(getattr(got, name), getattr(ref, name)), name


# ---------------------------------------------------------------- iCoM and DPC

def test_icom_is_the_true_phase_blurred(demo: tuple[Dataset4D, SimulationTruth]) -> None:
    """The demo's weak phase object: iCoM before the fit (curl-free rotation, branch by
    skewness) and at the true rotation both correlate with the true phase, atoms bright."""
    ds, truth = demo
    phase = true_phase(truth)
    before = virtual.virtual_images(ds)
    assert before.rotation_source == "curl" and before.transpose == truth.transpose
    assert abs((before.rotation_deg - truth.rotation_deg + 180) % 360 - 180) < 1.0
    fitted = virtual.virtual_images(ds, truth.rotation_deg, truth.transpose)
    assert fitted.rotation_source == "fit"
    assert corr(before["icom"], phase) > 0.6
    assert corr(fitted["icom"], phase) > 0.6
    assert corr(before["icom"], fitted["icom"]) > 0.99
    # rad: the probe blurs the peaks, so the contrast is below the true one, not above
    assert 0.2 * phase.std() < fitted["icom"].std() < 1.1 * phase.std()
    # the other branch is the same image with the opposite sign
    other = virtual.virtual_images(ds, truth.rotation_deg + 180.0, truth.transpose)
    np.testing.assert_allclose(other["icom"], -fitted["icom"], atol=1e-12)
    # ADF: scattering out of the disk where the atoms are
    assert corr(before["virtual-adf"], phase) > 0.5
    assert (before["dpc"] >= 0).all() and before["dpc"].std() > 0


def test_icom_integrates_a_known_gradient() -> None:
    """A COM field made from an off-centre bump: the integral returns the bump (no wrap
    from the scan's edges, thanks to the mirrored extension)."""
    n, m, step, inv_a = 64, 48, (0.5, 0.7), 0.05
    r, c = np.meshgrid(np.arange(n) * step[0], np.arange(m) * step[1], indexing="ij")
    phi = 0.3 * np.exp(-((r - 12.0) ** 2 + (c - 20.0) ** 2) / 8.0)
    grad_r, grad_c = np.gradient(phi, *step)
    com_px = np.stack([grad_r, grad_c], axis=-1) / (2 * math.pi) / inv_a
    got = virtual.icom_image(com_px, inv_a, step, 0.0, False)
    assert corr(got, phi) > 0.99
    # rotation and transpose undo what the detector frame did to the field
    theta = math.radians(37.0)
    rot = np.array([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]])
    det = (com_px @ rot)[..., ::-1]  # k_scan = R·T·k_det  =>  k_det = T·Rᵀ·k_scan
    np.testing.assert_allclose(virtual.icom_image(det, inv_a, step, theta, True), got,
                               atol=1e-12)


def test_plane_removal_is_the_least_squares_plane() -> None:
    """The three projections equal a least-squares fit of mean, row and column slope."""
    field = np.random.default_rng(1).normal(size=(7, 5, 2))
    r, c = np.meshgrid(np.arange(7) - 3.0, np.arange(5) - 2.0, indexing="ij")
    a = np.stack([np.ones(35), r.ravel(), c.ravel()], axis=1)
    coef, *_ = np.linalg.lstsq(a, field.reshape(35, 2), rcond=None)
    want = (field.reshape(35, 2) - a @ coef).reshape(field.shape)
    np.testing.assert_allclose(virtual._without_plane(field), want, atol=1e-12)


def test_descan_and_transpose_do_not_spoil_icom() -> None:
    """A linear descan (removed with the COM plane) and a transposed, rotated detector."""
    ds, truth = simulate_4dstem(scan_shape=(40, 40), detector_shape=(32, 32), dose=5e4,
                                aberrations={"C10": -30.0}, rotation_deg=110.0,
                                transpose=True, descan_px_per_px=(0.03, -0.02, 0.01, 0.02),
                                seed=5)
    images = virtual.virtual_images(ds)
    assert images.transpose
    assert corr(images["icom"], true_phase(truth)) > 0.5


# ----------------------------------------------------------------------- widget

@pytest.fixture(scope="module")
def small() -> Dataset4D:
    ds, _ = simulate_4dstem(scan_shape=(24, 24), detector_shape=(32, 32),
                            aberrations={"C10": -40.0, "C12": 10.0, "phi12": 0.3},
                            dose=5e4, seed=7)
    return ds


def test_widget_shows_a_virtual_image_until_the_fit_ends(
        small: Dataset4D, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("anywidget")
    from livessb.widget import virtualview

    passes: list[int] = []
    real_sums = virtualview.detector_sums

    def counted(*a: Any, **kw: Any) -> virtual.DetectorSums:
        passes.append(1)
        return real_sums(*a, **kw)

    monkeypatch.setattr(virtualview, "detector_sums", counted)
    session = livessb.Session(small, device="cpu")
    gate = threading.Event()
    real_fit = session.fit

    def gated_fit(**kw: Any) -> Any:
        assert gate.wait(TIMEOUT)
        return real_fit(**kw)

    cast(Any, session).fit = gated_fit  # the fit waits until the test has looked
    w = livessb.SSBWidget(session, trials=16)
    try:
        deadline = time.monotonic() + 30
        while not w.virtual_images and time.monotonic() < deadline:
            time.sleep(0.01)
        assert w.status == "fitting"
        assert w.image == "virtual-bf"
        assert sorted(w.virtual_images) == sorted(virtual.VIRTUAL_IMAGES)
        bf = w.virtual_images["virtual-bf"]
        assert bf["shape"] == [24, 24] and bf["unit"] == "counts"
        assert len(bf["data"]) == 2 * 24 * 24 and bf["range"][1] > bf["range"][0]
        assert w.virtual_images["icom"]["rotation_source"] == "curl"
        assert w.virtual_images["icom"]["unit"] == "rad"
        w.image = "virtual-adf"  # the browser's select, during the fit
        gate.set()
        w.wait(TIMEOUT)
        assert w.status == "done", w.message
        assert w.image == "phase"  # the fit's phase replaced it
        icom = w.virtual_images["icom"]
        assert icom["rotation_source"] == "fit"
        assert session.rotation_deg is not None
        assert icom["rotation_deg"] == pytest.approx(session.rotation_deg % 360.0)
        assert passes == [1]  # the pass over the counts ran once
        w.image = "dpc"  # after the fit: a virtual image stays chosen
        assert w.image == "dpc"
        with pytest.raises(Exception, match="image"):
            w.image = "bogus"
    finally:
        gate.set()
        w.close()
        session.close()


"""The widget's diffraction patterns from device-resident counts (skipped without a CUDA
GPU): one pattern sliced and binned on the device, one counted transfer of that pattern
only, the same values as from the host counts."""

from __future__ import annotations

import numpy as np

from cuda_skip import cp, pytestmark  # noqa: F401  (skips without a GPU)
from livessb.bench.device_data import DeviceDataset4D
from livessb.simulate import simulate_4dstem
from livessb.widget.patterns import bin_factor, pattern_at
from livessb.xp import counting


def test_device_pattern_is_one_small_transfer_of_the_host_pattern() -> None:
    ds, _ = simulate_4dstem(scan_shape=(16, 16), detector_shape=(160, 160), dose=2e4, seed=2)
    dev = DeviceDataset4D(cp.asarray(ds.counts), voltage_kV=ds.voltage_kV,
                          semiangle_mrad=ds.semiangle_mrad, scan_step_A=ds.scan_step_A,
                          detector_sampling_mrad=ds.detector_sampling_mrad)
    b = bin_factor(ds.detector_shape)
    assert b == 2
    with counting() as syncs:
        image = pattern_at(dev.counts, 5, 9, b)
    assert syncs.transfers == 1 and syncs["site:diffraction.pattern"] == 1
    assert syncs.round_trips == 1  # no scalar read either
    assert image.shape == (80, 80) and image.nbytes == 80 * 80 * 4  # that pattern, binned
    np.testing.assert_allclose(image, pattern_at(ds.counts, 5, 9, b), rtol=1e-6)

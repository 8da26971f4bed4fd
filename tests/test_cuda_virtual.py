"""Virtual images of counts resident on the GPU against the host's (skipped without a
CUDA GPU): the pass stays on the device, the images come back in one download, the BF
and ADF sums are the host's to the last bit (same mask, float64 sums of integers)."""

from __future__ import annotations

import numpy as np

from cuda_skip import cp, pytestmark  # noqa: F401  (skips without a GPU)
from livessb import Dataset4D
from livessb.bench.device_data import DeviceDataset4D
from livessb.simulate import simulate_4dstem
from livessb.virtual import VIRTUAL_IMAGES, detector_sums, virtual_images
from livessb.xp import counting


def test_resident_counts_give_the_host_images() -> None:
    ds, _ = simulate_4dstem(scan_shape=(48, 40), detector_shape=(32, 32), dose=5e4,
                            aberrations={"C10": -30.0}, rotation_deg=25.0, seed=4,
                            descan_px_per_px=(0.02, 0.0, 0.0, -0.01))
    host = Dataset4D(ds.counts, voltage_kV=ds.voltage_kV, semiangle_mrad=ds.semiangle_mrad,
                     scan_step_A=ds.scan_step_A, detector_sampling_mrad=ds.detector_sampling_mrad)
    dev = DeviceDataset4D(cp.asarray(ds.counts), voltage_kV=ds.voltage_kV,
                          semiangle_mrad=ds.semiangle_mrad, scan_step_A=ds.scan_step_A,
                          detector_sampling_mrad=ds.detector_sampling_mrad)
    bf = host.bright_field
    with counting() as count:
        sums = detector_sums(dev.counts, (bf.center_row, bf.center_col), bf.radius_px)
        a = virtual_images(dev, sums=sums)
    assert count.round_trips == 2, dict(count)  # the COM (rotation estimate), the images
    assert isinstance(sums.bf, cp.ndarray)
    ref = detector_sums(host.counts, (bf.center_row, bf.center_col), bf.radius_px)
    assert np.array_equal(cp.asnumpy(sums.bf), ref.bf)
    assert np.array_equal(cp.asnumpy(sums.adf), ref.adf)
    np.testing.assert_allclose(cp.asnumpy(sums.com_px), ref.com_px, rtol=0, atol=1e-12)
    b = virtual_images(host)
    assert a.transpose == b.transpose and abs(a.rotation_deg - b.rotation_deg) < 1e-6
    for name in VIRTUAL_IMAGES:
        scale = float(np.abs(b[name]).max())
        np.testing.assert_allclose(a[name], b[name], rtol=0, atol=1e-9 * scale, err_msg=name)

import io

import numpy as np
import pytest
from PIL import Image

from livessb.render import contrast_limits, phase_to_png, to_uint8


def _decode(png: bytes) -> np.ndarray:
    img = Image.open(io.BytesIO(png))
    assert img.format == "PNG"
    assert img.mode == "L"
    return np.asarray(img)


def test_png_roundtrip_shape_and_range() -> None:
    rng = np.random.default_rng(0)
    phase = rng.normal(size=(30, 50)).astype(np.float32)
    png = phase_to_png(phase)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    out = _decode(png)
    assert out.shape == (30, 50)
    assert out.min() == 0 and out.max() == 255


def test_percentile_contrast_ignores_outliers() -> None:
    phase = np.tile(np.linspace(-1.0, 1.0, 100), (100, 1))
    phase[0, 0] = 1e6  # one hot pixel must not flatten the image
    lo, hi = contrast_limits(phase)
    assert hi < 2.0 and lo == pytest.approx(-0.99, abs=0.02)
    out = to_uint8(phase)
    assert int(out[50, 50]) == pytest.approx(128, abs=3)
    assert out[0, 0] == 255
    # monotone: brighter phase -> brighter pixel
    assert np.all(np.diff(out[1].astype(int)) >= 0)


def test_flat_and_nonfinite_images() -> None:
    assert np.all(to_uint8(np.zeros((4, 5))) == 128)
    a = np.ones((4, 4))
    a[0, 0] = np.nan
    a[1, 1] = 2.0
    out = _decode(phase_to_png(a))
    assert out.shape == (4, 4)


def test_rejects_non_2d() -> None:
    with pytest.raises(ValueError):
        to_uint8(np.zeros((2, 3, 4)))


def test_deterministic() -> None:
    rng = np.random.default_rng(1)
    phase = rng.normal(size=(16, 16))
    assert phase_to_png(phase) == phase_to_png(phase.copy())


def test_max_px_downsamples_keeping_aspect() -> None:
    phase = np.random.default_rng(2).normal(size=(300, 150))
    assert _decode(phase_to_png(phase, max_px=100)).shape == (100, 50)
    assert _decode(phase_to_png(phase, max_px=1000)).shape == (300, 150)

"""2-D FFTs on either array module: SciPy's on the host (every core; NumPy's runs on one
and is several times slower on the small batched transforms of crystal mode), CuPy's on
the GPU."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.fft


def fft2(x: Any, xp: Any, axes: tuple[int, int] = (-2, -1),
         shape: tuple[int, int] | None = None, inverse: bool = False) -> Any:
    """The (inverse) 2-D FFT of ``x`` over ``axes``, zero-padded to ``shape`` if given."""
    if xp is np:
        return (scipy.fft.ifft2 if inverse else scipy.fft.fft2)(x, s=shape, axes=axes,
                                                                 workers=-1)
    return (xp.fft.ifft2 if inverse else xp.fft.fft2)(x, s=shape, axes=axes)


def rfft2(x: Any, xp: Any, axes: tuple[int, int] = (-2, -1)) -> Any:
    """The half-spectrum 2-D FFT of a real ``x`` over ``axes``."""
    if xp is np:
        return scipy.fft.rfft2(x, axes=axes, workers=-1)
    return xp.fft.rfft2(x, axes=axes)

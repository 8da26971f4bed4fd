"""Drift-corrected average of a series' reconstructions: each phase image registered to
its neighbour towards the reference by sub-pixel cross-correlation (scikit-image's
``phase_cross_correlation`` on Tukey-windowed images, so the scan edges do not decide),
the shifts added up along the series (a drift that grows over the series is found one
small step at a time: a crystal's cross-correlation repeats every lattice vector, so a
large shift in one step could be taken for a smaller one), then each image, moved by
that estimate, registered to the reference itself (the small remainder: no errors
accumulated along the chain, and the window's pull towards zero shift acts on the
remainder only), shifted by a Fourier phase
ramp (unitary: the noise keeps its power, so the SNR gain measured afterwards is the
average's own, not interpolation smoothing), averaged; with the shifts and the measured SNR gain.

SNR gain: the noise of one image from the differences of consecutive registered images
(σ₁ = std(aᵢ - aᵢ₊₁)/√2), that of the average from the difference of the averages of
the even and the odd images (halves of sizes a, b: σ_N = std(Ā - B̄)·√((1/N)/(1/a + 1/b))),
both over the interior (margins of the largest shift and an eighth of the image left out:
the shift wraps around and SSB edges differ). Where the differences are noise only, the
gain σ₁/σ_N is √N.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.ndimage import fourier_shift
from skimage.filters import window
from skimage.registration import phase_cross_correlation

UPSAMPLE_FACTOR = 20  # registration to 1/20 pixel
TUKEY_ALPHA = 0.3  # the tapered fraction of the window (0: none, 1: Hann)


@dataclass
class DriftAverage:
    """The average phase (rad), each image's shift onto the reference (px, rows/cols),
    and the measured SNR gain against the ideal √N."""

    phase: np.ndarray
    shifts_px: list[tuple[float, float]]
    reference: int
    snr_gain: float
    sigma_single: float
    sigma_average: float
    interior: tuple[int, int, int, int]

    @property
    def n(self) -> int:
        return len(self.shifts_px)

    def to_dict(self, sampling_A: tuple[float, float] | None = None) -> dict[str, Any]:
        d: dict[str, Any] = {
            "n": self.n, "reference": self.reference,
            "shifts_px": [list(s) for s in self.shifts_px],
            "snr_gain": self.snr_gain, "snr_gain_ideal": math.sqrt(self.n),
            "snr_gain_ratio": self.snr_gain / math.sqrt(self.n),
            "sigma_single_rad": self.sigma_single, "sigma_average_rad": self.sigma_average,
            "interior_px": list(self.interior)}
        if sampling_A is not None:
            d["shifts_A"] = [[s[0] * sampling_A[0], s[1] * sampling_A[1]]
                             for s in self.shifts_px]
        return d


def register(reference: np.ndarray, image: np.ndarray) -> tuple[float, float]:
    """The shift (rows, cols) that moves ``image`` onto ``reference``, sub-pixel."""
    taper = window(("tukey", TUKEY_ALPHA), reference.shape)
    shift, _error, _phasediff = phase_cross_correlation(
        (reference - reference.mean()) * taper, (image - image.mean()) * taper,
        upsample_factor=UPSAMPLE_FACTOR, normalization=None)
    return float(shift[0]), float(shift[1])


def chained_shifts(stack: Sequence[np.ndarray], reference: int) -> list[tuple[float, float]]:
    """Each image's shift onto ``stack[reference]``: registered to its neighbour towards
    the reference, shifts added up, then the remainder against the reference."""
    shifts: list[tuple[float, float]] = [(0.0, 0.0)] * len(stack)
    for step in (1, -1):
        for i in range(reference + step, len(stack) if step == 1 else -1, step):
            near = register(stack[i - step], stack[i])
            prev = shifts[i - step]
            shifts[i] = (prev[0] + near[0], prev[1] + near[1])
    for i, coarse in enumerate(shifts):
        if i != reference:
            rest = register(stack[reference], shifted(stack[i], coarse))
            shifts[i] = (coarse[0] + rest[0], coarse[1] + rest[1])
    return shifts


def shifted(image: np.ndarray, shift: tuple[float, float]) -> np.ndarray:
    return np.real(np.fft.ifft2(fourier_shift(np.fft.fft2(image), shift)))


def drift_corrected_average(images: Sequence[np.ndarray], reference: int = 0) -> DriftAverage:
    """Register every image to ``images[reference]``, average, measure the SNR gain."""
    if len(images) < 2:
        raise ValueError(f"a drift-corrected average needs at least 2 reconstructions, got "
                         f"{len(images)}")
    shapes = {np.shape(im) for im in images}
    if len(shapes) != 1:
        raise ValueError(f"reconstructions of different shapes {sorted(shapes)} cannot be "
                         "averaged: a series needs scans of one geometry")
    stack = [np.asarray(im, dtype=np.float64) for im in images]
    shifts = chained_shifts(stack, reference)
    aligned = np.stack([shifted(im, s) for im, s in zip(stack, shifts, strict=True)])
    interior = interior_box(aligned.shape[1:], shifts)
    single, average = noise_levels(aligned, interior)
    return DriftAverage(phase=aligned.mean(axis=0).astype(np.float32), shifts_px=shifts,
                        reference=reference, snr_gain=single / average, sigma_single=single,
                        sigma_average=average, interior=interior)


def interior_box(shape: tuple[int, ...], shifts: Sequence[tuple[float, float]]) -> tuple[
        int, int, int, int]:
    rows, cols = int(shape[0]), int(shape[1])
    wrap = math.ceil(max(max(abs(s[0]), abs(s[1])) for s in shifts))
    mr, mc = wrap + rows // 8, wrap + cols // 8
    if rows - 2 * mr < 8 or cols - 2 * mc < 8:
        raise ValueError(f"the drift ({wrap} px) leaves too little overlap in a {rows}x{cols} "
                         "reconstruction to average: the scans hardly overlap")
    return (mr, rows - mr, mc, cols - mc)


def noise_levels(aligned: np.ndarray, box: tuple[int, int, int, int]) -> tuple[float, float]:
    """σ of one image and of the average (module docstring), over ``box``."""
    a = aligned[:, box[0]:box[1], box[2]:box[3]]
    a = a - a.mean(axis=(1, 2), keepdims=True)  # phase offsets differ per scan
    n = len(a)
    single = float(np.mean([np.std(a[i] - a[i + 1]) for i in range(n - 1)]) / math.sqrt(2))
    even, odd = a[0::2], a[1::2]
    diff = even.mean(axis=0) - odd.mean(axis=0)
    average = float(np.std(diff) * math.sqrt((1 / n) / (1 / len(even) + 1 / len(odd))))
    return single, average


def read_phase(path: str | Path) -> tuple[np.ndarray, tuple[float, float]]:
    """The phase image and its pixel size (Å) of a reconstruction EMD written by
    ``export_hdf5.save_reconstruction_emd``."""
    import h5py

    with h5py.File(path, "r") as f:
        grp = f["phase_root"]["phase"]
        data = np.asarray(grp["data"][...])
        step = (float(np.diff(grp["dim0"][:2])[0]), float(np.diff(grp["dim1"][:2])[0]))
    return data, step

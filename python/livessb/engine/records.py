"""Typed records an engine keeps per prepared scan window and per dataset.

Every engine hands out a ``PreparedSpectra`` (the part every engine shares: window,
spectra G, DC, energy, rotation) whose ``part`` holds its own typed geometry: the
NumPy reference geometry on the host (``HostPart``), device rows on CUDA
(``engine.cuda.records.CUDAPart``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

import numpy as np

from ..dataset import Dataset4D
from ..physics.geometry import BFPixels, bright_field_pixels
from ..physics.overlap import OverlapGrid
from ..results import Bounds

PartT = TypeVar("PartT")


@dataclass(eq=False)  # identity: two windows with equal fields are still two buffers
class PreparedSpectra(Generic[PartT]):
    """Half-plane spectra G_b(ν) of one scan window; ``part`` is the engine's own."""

    shape: tuple[int, int]  # padded scan shape
    bounds: Bounds  # measured positions, full-scan pixels
    n_bf: int
    G: Any  # (B, M) complex, M = Nr·(Nc//2+1) flattened half plane
    dc: float  # mean over BF pixels of G_b(0): the object's DC term
    part: PartT
    energy: float = 0.0
    rotation: tuple[float, bool] | None = None
    # Σ_R I(R, k_b) over the measured positions, (B,) float64 on the host, for the errors'
    # Poisson level (fit.uncertainty.window_pixel_totals): every engine's region windows
    # have it once their rotation is set (CPU: summed at prepare; CUDA: its window mean,
    # downloaded with the first energy); None before, and for the CPU's full field.
    pixel_totals: np.ndarray | None = None
    apodised: bool = False  # G of the Hann-weighted window (physics.apodisation): fits only


def own(spectra: object, part_type: type[PartT]) -> PreparedSpectra[PartT]:
    """``spectra`` as this engine's record, or a clear error for another engine's handle."""
    if isinstance(spectra, PreparedSpectra) and isinstance(spectra.part, part_type):
        return cast(PreparedSpectra[PartT], spectra)
    raise TypeError(
        f"these spectra were not prepared by this engine ({type(spectra).__name__}); "
        "prepare them with the engine that scores them")


@dataclass(eq=False)
class ReferenceGeometry:
    """What the NumPy reference operations read besides the common record: the half-plane
    frequencies and weights, the scan-frame BF frequencies k and the overlap grids per
    BF chunk at the current rotation (a list, or ``reference.LazyGrids`` that builds each
    chunk when it is used)."""

    nu_r: Any  # (M,)
    nu_c: Any  # (M,)
    weights: Any  # (M,) 1 or 2 per rfft column
    k: Any = None  # (B, 2)
    grids: Sequence[OverlapGrid] = field(default_factory=list)


@dataclass(eq=False)
class PairPack:
    """The trotter pairs of one half plane at one rotation, ν-major (CSR), b ascending per
    ν: what the kernels otherwise find per call, kept when small."""

    indptr: np.ndarray  # (M + 1,) int64
    idx: np.ndarray  # int32 BF pixel of each pair
    amp_m: np.ndarray  # A(k-ν)A(k)
    amp_p: np.ndarray  # A(k+ν)A(k)
    minus: np.ndarray  # bool: k-ν in the disc (the k-ν trotter lobe)

    def arrays(self) -> tuple[np.ndarray, ...]:
        return (self.indptr, self.idx, self.amp_m, self.amp_p, self.minus)

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in self.arrays()))


@dataclass(eq=False)
class KernelGeometry:
    """What the Numba kernels read besides the spectra at one rotation: per BF pixel its
    scan-frame frequency and aperture A(k), and the pair packs kept so far (by upsampling
    factor; None: too large to keep, the kernels find the pairs per call)."""

    k_r: np.ndarray  # (B,) contiguous
    k_c: np.ndarray  # (B,)
    a_k: np.ndarray  # (B,) A(k), as physics.optics.aperture computes it
    to_det: np.ndarray  # scan-frame → detector-frame (2, 2)
    packs: dict[int, PairPack | None] = field(default_factory=dict)
    uses: dict[int, int] = field(default_factory=dict)  # kernel calls per factor, no pack yet


@dataclass(eq=False)
class FineFrequencies:
    """The f-times finer reconstruction half plane: its frequencies and, per frequency,
    the coarse spectrum column it reads (conjugated where ``alias_conj``)."""

    nu_r: np.ndarray
    nu_c: np.ndarray
    alias: np.ndarray  # int64
    alias_conj: np.ndarray  # bool


@dataclass(eq=False)
class HostPart:
    """The CPU engine's part: reference geometry plus the Numba kernels' geometry (both
    belong to the current rotation; set_rotation replaces them) and the fine half planes
    (rotation-independent)."""

    geometry: ReferenceGeometry
    kernel: KernelGeometry | None = None
    fine: dict[int, FineFrequencies] = field(default_factory=dict)  # by upsampling factor
    # The previous rotation's state (energy, k, grids, kernel geometry), kept when small
    # so a preview at another rotation and the way back rebuild nothing.
    previous: dict[tuple[float, bool], tuple[Any, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class DatasetGeometry:
    """The dataset constants an engine computes with."""

    shape: tuple[int, ...]  # counts shape (Rr, Rc, Kr, Kc)
    detector_shape: tuple[int, int]
    step: tuple[float, float]  # scan step, Å
    wavelength: float  # Å
    k_alpha: float  # aperture radius, 1/Å
    edge_width: float  # one detector pixel, 1/Å
    bf_center: tuple[float, float]  # detector px
    bf: BFPixels
    # Each BF pixel's mean count (the mean pattern there): engine.spikes' limits.
    bf_means: np.ndarray = field(compare=False)

    @classmethod
    def of(cls, dataset: Dataset4D) -> DatasetGeometry:
        bf = dataset.bright_field
        center = (float(bf.center_row), float(bf.center_col))
        pixels = bright_field_pixels(dataset.detector_shape, (bf.center_row, bf.center_col),
                                     dataset.detector_pixel_inv_A, dataset.k_alpha)
        return cls(
            shape=tuple(dataset.counts.shape), detector_shape=dataset.detector_shape,
            step=dataset.scan_step_A, wavelength=dataset.wavelength_A,
            k_alpha=dataset.k_alpha, edge_width=dataset.detector_pixel_inv_A,
            bf_center=center, bf=pixels,
            bf_means=np.asarray(dataset.mean_pattern, dtype=np.float64)[pixels.rows, pixels.cols])


def same_pixels(a: DatasetGeometry, b: DatasetGeometry) -> bool:
    """Whether two geometries share every constant a rotation's geometry rows are built
    from (the BF pixel set, its frequencies, the aperture and the detector pixel)."""
    return (a.k_alpha == b.k_alpha and a.edge_width == b.edge_width
            and a.wavelength == b.wavelength and a.bf.count == b.bf.count
            and bool(np.array_equal(a.bf.rows, b.bf.rows))
            and bool(np.array_equal(a.bf.cols, b.bf.cols))
            and bool(np.array_equal(a.bf.k_det, b.bf.k_det)))

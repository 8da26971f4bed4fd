"""Launch geometry and argument records of the CUDA kernels (host side, no CuPy).

Each ``*Args`` record lists its kernel's parameters by name, in the order and with
the scalar dtypes of the kernel's signature in ``kernels/*.cu`` (a test parses the
source and checks them): ``args()`` is the tuple a launch passes. Array fields are
device arrays (``Any``); scalar fields are NumPy scalars of the C type (int →
np.int32, long long → np.int64, float → np.float32, double → np.float64).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...params import MRAD, N_JOINT
from ...physics.geometry import BFPixels, scan_frame_frequencies
from ...physics.optics import aperture
from .. import cuda_kernels as ck

# Frequency blocks × pixel splits that fill the device for a launch of few candidates:
# about five waves of resident blocks (H200: 132 SMs × 6 of vp_eval<1>, × 3 of vp_derivs).
FILL_BLOCKS_EVAL = 4096
FILL_BLOCKS_DERIV = 2048
MAX_GRID_Z = 65535  # CUDA's limit on gridDim.z (stage_window: one z per staged pixel)
DERIV_SHARED_BYTES = ck.NA * ck.NT * 8  # vp_derivs' float64 accumulators
# A NULL pointer argument (an optional output not wanted): 8 bytes of zero. CuPy turns a
# Python None into 0xffffffff (cupy/cupy#9046), so never pass None.
NULL_POINTER = np.uint64(0)


@dataclass(frozen=True)
class KernelArgs:
    """Base of the argument records: ``KERNEL`` names the kernel (without template)."""

    KERNEL: ClassVar[str] = ""

    def args(self) -> tuple[Any, ...]:
        # A dataclass's __init__ sets its fields in order (and frozen ones take no other
        # attribute), so the instance dict is the field order: no getattr per field.
        return tuple(self.__dict__.values())


def launch(kernel: Any, grid: tuple[int, ...], block: tuple[int, ...], args: KernelArgs,
           shared_mem: int = 0) -> None:
    """One launch of a compiled kernel with a record's arguments."""
    if shared_mem:
        kernel(grid, block, args.args(), shared_mem=shared_mem)
    else:
        kernel(grid, block, args.args())


@dataclass(frozen=True)
class KernelGeo:
    """The geometry scalars every scoring kernel takes, πλ, and the pairs it keeps."""

    g_ka2: np.float64  # k_alpha² (trotter mask, float64)
    g_ka: np.float32  # k_alpha
    g_inv_w: np.float32  # 1 / edge width
    g_twopilam: np.float32  # 2πλ
    pilam: np.float64  # πλ
    # (1/step_r, 1/step_c, m_r, m_c, reach²) float64 on the device where an alias's pixels
    # are left out (physics.aliases.alias_spacing with orders; reach² = ((max |k| + k_α)
    # (1 + 1e-9))²: an alias ν' farther from the origin holds no BF pixel, so the kernels
    # skip its test, common.cu alias_reach), else NULL_POINTER ...
    g_alias: Any = NULL_POINTER
    # ... and then the kernels of cuda_kernels.module(alias=True)
    aliased: bool = False

    @classmethod
    def of(cls, k_alpha: float, edge_width: float, wavelength: float,
           alias_spacing: np.ndarray | None = None, upload: Any = None,
           k_max: float = 0.0) -> KernelGeo:
        """``alias_spacing`` (``physics.aliases.alias_spacing``): where it has orders (an
        undersampled scan, "excluded") it goes to the device through ``upload``, with the
        reach of ``k_max`` (the largest |k| of the BF pixels, 1/Å), and the kernels are the
        alias module's; else every pair is kept."""
        ka2, ka, inv_w, twopilam = ck.geo_args(k_alpha, edge_width, wavelength)
        pilam = np.float64(math.pi * wavelength)
        if alias_spacing is None or not np.any(alias_spacing[2:]):
            return cls(ka2, ka, inv_w, twopilam, pilam)
        reach2 = ((float(k_max) + float(k_alpha)) * (1.0 + 1e-9)) ** 2
        table = np.append(np.asarray(alias_spacing, dtype=np.float64), reach2)
        return cls(ka2, ka, inv_w, twopilam, pilam, upload(table), True)

    def function(self, name: str, dynamic_shared_bytes: int = 0) -> Any:
        """The compiled kernel ``name`` of the module these pairs need."""
        return ck.function(name, dynamic_shared_bytes, self.aliased)


@dataclass(frozen=True)
class Window:
    """The spectra's leading kernel arguments: G (B, M) and the half-plane frequencies."""

    G: Any
    B: np.int32
    M: np.int32
    Nr: np.int32
    Nc: np.int32
    nu_r: Any
    nu_c: Any

    @classmethod
    def of(cls, G: Any, n_bf: int, M: int, shape: tuple[int, int], nu_r: Any,
           nu_c: Any) -> Window:
        return cls(G, np.int32(n_bf), np.int32(M), np.int32(shape[0]), np.int32(shape[1]),
                   nu_r, nu_c)


# -- argument records, one per kernel (fields in signature order) ---------------------
@dataclass(frozen=True)
class GatherBFArgs(KernelArgs):
    KERNEL: ClassVar[str] = "gather_bf"
    counts: Any
    npos: np.int64
    pos0: np.int64
    K: np.int32
    idx: Any
    B: np.int32
    P: np.int64
    bf: Any


@dataclass(frozen=True)
class BFComArgs(KernelArgs):
    KERNEL: ClassVar[str] = "bf_com"
    bf: Any
    B: np.int32
    P: np.int64
    kpx: Any
    out: Any


@dataclass(frozen=True)
class DetectorSumsArgs(KernelArgs):  # the virtual images' pass (engine/cuda/virtual_sums.py)
    KERNEL: ClassVar[str] = "detector_sums"
    counts: Any
    P: np.int64
    kr: np.int32
    kc: np.int32
    cr: np.float64
    cc: np.float64
    r2: np.float64
    out: Any


@dataclass(frozen=True)
class EffectiveSumsArgs(KernelArgs):  # effective scan frequencies (engine/cuda/prepare.py)
    KERNEL: ClassVar[str] = "effective_sums"
    G: Any
    B: np.int32
    Nr: np.int32
    Nc: np.int32
    per: np.int32
    out: Any


@dataclass(frozen=True)
class DescanMomentsArgs(KernelArgs):  # preprocessing's pass (engine/cuda/descan_sums.py)
    KERNEL: ClassVar[str] = "descan_moments"
    counts: Any
    Rr: np.int32
    Rc: np.int32
    kr: np.int32
    kc: np.int32
    b: np.int32
    r0: np.int32
    c0: np.int32
    h: np.int32
    w: np.int32
    window: Any
    level_per_total: np.float64
    ramp_lo: np.float64
    ramp_span: np.float64
    totals: Any
    centres: Any


@dataclass(frozen=True)
class WindowMeanArgs(KernelArgs):
    KERNEL: ClassVar[str] = "window_mean"
    bf: Any
    Rr: np.int32
    Rc: np.int32
    R0: np.int32
    C0: np.int32
    h: np.int32
    w: np.int32
    mean: Any


@dataclass(frozen=True)
class StageWindowArgs(KernelArgs):
    KERNEL: ClassVar[str] = "stage_window"
    bf: Any
    Rr: np.int32
    Rc: np.int32
    b0: np.int32
    R0: np.int32
    C0: np.int32
    h: np.int32
    w: np.int32
    Nr: np.int32
    Nc: np.int32
    mean: Any
    out: Any


@dataclass(frozen=True)
class _PixelWalkArgs(KernelArgs):
    """The leading parameters of the kernels that walk the BF pixels per frequency."""

    G: Any
    B: np.int32
    M: np.int32
    Nr: np.int32
    Nc: np.int32
    nu_r: Any
    nu_c: Any
    k64: Any
    px: Any


@dataclass(frozen=True)
class _ScoringArgs(_PixelWalkArgs):
    """The parameters vp_eval and vp_derivs share."""

    cand: Any
    g_ka2: np.float64
    g_ka: np.float32
    g_inv_w: np.float32
    g_twopilam: np.float32
    g_alias: Any  # KernelGeo.g_alias
    g_alias_tab: Any  # the window's exclusion table at this rotation (alias_exclusion_table)
    pilam: np.float64
    partial: Any
    bsplit: np.int32
    raw: Any


@dataclass(frozen=True)
class VpDerivsArgs(_ScoringArgs):  # the shared parameters, the lobe masks, per-ν output
    KERNEL: ClassVar[str] = "vp_derivs"
    masks: Any
    mask_stride: np.int32
    per_nu: Any  # (2K, N_PER_NU, M) float64, or NULL_POINTER: not wanted


@dataclass(frozen=True)
class VpEvalArgs(_ScoringArgs):  # the shared parameters, dk, the turns
    KERNEL: ClassVar[str] = "vp_eval"
    unused: Any  # NULL_POINTER (the kernel's parameter layout as measured)
    dk: Any
    turn: Any  # (R, 2) cos, sin of θ_r - θ₀ for a rotation scan, else NULL_POINTER


@dataclass(frozen=True)
class VpEvalFinishArgs(KernelArgs):
    KERNEL: ClassVar[str] = "vp_eval_finish"
    raw: Any
    nsplit: np.int32
    M: np.int32
    Nc: np.int32
    partial: Any


@dataclass(frozen=True)
class VpDerivsFinishArgs(KernelArgs):
    KERNEL: ClassVar[str] = "vp_derivs_finish"
    raw: Any
    nsplit: np.int32
    M: np.int32
    Nc: np.int32
    nu_r: Any
    nu_c: Any
    cand: Any
    ka2: np.float64
    pilam: np.float64
    partial: Any
    per_nu: Any


@dataclass(frozen=True)
class EnergyArgs(_PixelWalkArgs):
    KERNEL: ClassVar[str] = "energy_kernel"
    g_ka2: np.float64
    g_ka: np.float32
    g_inv_w: np.float32
    g_twopilam: np.float32
    g_alias: Any
    g_alias_tab: Any
    partial: Any
    pairs: Any
    bsplit: np.int32


@dataclass(frozen=True)
class SupportMaskArgs(KernelArgs):
    KERNEL: ClassVar[str] = "support_mask"
    B: np.int32
    M: np.int32
    H: np.int32  # the grid's columns (M = rows·H): its slots' bins, slot_bin
    tile_r: np.int32  # rows of the consumer's warp tile (slot_bin)
    nu_r: Any
    nu_c: Any
    px: Any
    ka2: np.float64
    ka: np.float32
    lobe: np.int32
    alias_tab: Any  # the grid's exclusion table, or NULL_POINTER
    masks: Any


@dataclass(frozen=True)
class AliasExclusionArgs(KernelArgs):  # alias_pixels="excluded" (prepare.alias_exclusion_table)
    KERNEL: ClassVar[str] = "alias_exclusion"
    B: np.int32
    M: np.int32
    nu_r: Any
    nu_c: Any
    k64: Any
    px: Any
    g_ka2: np.float64
    g_ka: np.float32
    g_inv_w: np.float32
    g_twopilam: np.float32
    g_alias: Any
    out: Any


@dataclass(frozen=True)
class ReconstructArgs(KernelArgs):
    KERNEL: ClassVar[str] = "reconstruct_kernel"
    G: Any
    B: np.int32
    M: np.int32
    Nr: np.int32
    Nc: np.int32
    Fr: np.int32
    Fc: np.int32
    nu_r: Any
    nu_c: Any
    row_alias: Any
    k64: Any
    px: Any
    masks: Any
    mask_stride: np.int32
    cand: Any
    g_ka2: np.float64
    g_ka: np.float32
    g_inv_w: np.float32
    g_twopilam: np.float32
    g_alias: Any  # (the scan's own grid only: finer grids keep every pair)
    g_alias_tab: Any
    pilam: np.float64
    eps: np.float32
    mode: np.int32
    n_sum: np.int32  # BF pixels the masks keep (the normalisation): B, or a subset's count
    out: Any


@dataclass(frozen=True)
class SlotBinsArgs(KernelArgs):  # the slot→bin map itself (tests/test_cuda_parity.py)
    KERNEL: ClassVar[str] = "slot_bins"
    n: np.int32
    rows: np.int32
    H: np.int32
    tile_r: np.int32
    out: Any


ARG_RECORDS: tuple[type[KernelArgs], ...] = (
    GatherBFArgs, BFComArgs, WindowMeanArgs, StageWindowArgs, VpEvalArgs, VpEvalFinishArgs,
    VpDerivsArgs, VpDerivsFinishArgs, EnergyArgs, SupportMaskArgs, AliasExclusionArgs,
    ReconstructArgs, DetectorSumsArgs, DescanMomentsArgs, EffectiveSumsArgs, SlotBinsArgs)


# -- builders of the records the scoring kernels share ---------------------------------
# (alias_tab: the window's exclusion table at the rotation of k64 and px, or NULL_POINTER
# where every pair is kept; prepare.alias_exclusion_table)
def vp_eval_args(w: Window, k64: Any, px: Any, alias_tab: Any, cand: Any, geo: KernelGeo,
                 partial: Any, bsplit: int, raw: Any, dk: Any,
                 turn: Any = None) -> VpEvalArgs:
    return VpEvalArgs(w.G, w.B, w.M, w.Nr, w.Nc, w.nu_r, w.nu_c, k64, px, cand, geo.g_ka2,
                      geo.g_ka, geo.g_inv_w, geo.g_twopilam, geo.g_alias, alias_tab, geo.pilam,
                      partial, np.int32(bsplit), raw, NULL_POINTER, dk,
                      NULL_POINTER if turn is None else turn)


def vp_derivs_args(w: Window, k64: Any, px: Any, alias_tab: Any, cand: Any, geo: KernelGeo,
                   partial: Any, bsplit: int, raw: Any, masks: Any, mask_stride: int,
                   per_nu: Any = None) -> VpDerivsArgs:
    return VpDerivsArgs(w.G, w.B, w.M, w.Nr, w.Nc, w.nu_r, w.nu_c, k64, px, cand, geo.g_ka2,
                        geo.g_ka, geo.g_inv_w, geo.g_twopilam, geo.g_alias, alias_tab,
                        geo.pilam, partial, np.int32(bsplit), raw, masks,
                        np.int32(mask_stride), NULL_POINTER if per_nu is None else per_nu)


def energy_args(w: Window, k64: Any, px: Any, alias_tab: Any, geo: KernelGeo, partial: Any,
                pairs: Any, bsplit: int) -> EnergyArgs:
    return EnergyArgs(w.G, w.B, w.M, w.Nr, w.Nc, w.nu_r, w.nu_c, k64, px, geo.g_ka2, geo.g_ka,
                      geo.g_inv_w, geo.g_twopilam, geo.g_alias, alias_tab, partial, pairs,
                      np.int32(bsplit))


# -- launch geometry -------------------------------------------------------------------
def freq_blocks(M: int) -> int:
    """Blocks of NT frequencies over a half plane of M."""
    return -(-M // ck.NT)


def pixel_split(M: int, n_bf: int, min_blocks: int = 0) -> tuple[int, int]:
    """(pixels per split, splits) of the b loop: small windows split the BF pixels
    over blocks (then a finish kernel adds the splits in order). Depends on the
    window only (scoring, derivatives and energy add in the same order), unless a
    launch of few candidates asks for ``min_blocks`` frequency blocks × splits."""
    nblk = freq_blocks(M)
    B = n_bf
    if nblk >= 512:
        if nblk >= min_blocks:
            return B, 1
        want = math.ceil(min_blocks / nblk)
    else:
        want = min(16, math.ceil(2048 / nblk))
    per = math.ceil(math.ceil(B / want) / ck.BT) * ck.BT
    return per, math.ceil(B / per)


def eval_launches(K: int, eval_group: int) -> list[tuple[slice, int, int]]:
    """(candidates, per thread, min_blocks) of each scoring launch of a batch of K.

    Candidates go eval_group to a thread; a lone leftover (a batch of 25 in groups of
    4) gets its own launch of one candidate per thread, split over the pixels to fill
    the device, instead of three padded copies of itself."""
    kc = eval_group
    while kc > 1 and kc >= 2 * K:
        kc //= 2
    if kc > 1 and K > kc and K % kc == 1:
        return [(slice(0, K - 1), kc, 0), (slice(K - 1, K), 1, FILL_BLOCKS_EVAL)]
    return [(slice(0, K), kc, 0)]


def recon_launches(K: int) -> list[slice]:
    """The candidates of each reconstruction launch of a batch of K (a map's tiles), in
    order: as many of ck.RECON_GROUPS' largest as fit, then the largest that fit the rest."""
    out, start = [], 0
    for group in sorted(ck.RECON_GROUPS, reverse=True):
        while K - start >= group:
            out.append(slice(start, start + group))
            start += group
    return out


def padded_count(K: int, pad_to: int) -> int:
    """K rounded up to whole groups of ``pad_to`` (a launch's candidate rows)."""
    return -(-K // pad_to) * pad_to


def candidate_table(candidates: np.ndarray, pad_to: int = 1) -> np.ndarray:
    """(K, 8) float64 rows: C10, C12, cos 2φ, sin 2φ, τr (rad), τc (rad), Δ, 0."""
    c = np.asarray(candidates, dtype=np.float64).reshape(-1, N_JOINT)
    K = len(c)
    Kp = padded_count(K, pad_to)
    out = np.zeros((Kp, 8))
    out[:K, 0] = c[:, 0]
    out[:K, 1] = c[:, 1]
    out[:K, 2] = np.cos(2 * c[:, 2])
    out[:K, 3] = np.sin(2 * c[:, 2])
    out[:K, 4] = c[:, 3] * MRAD
    out[:K, 5] = c[:, 4] * MRAD
    out[:K, 6] = c[:, 5]
    if Kp > K:
        out[K:] = out[K - 1]
    return out


def pixel_rows(
    bf: BFPixels, k_alpha: float, edge_width: float, anchors: np.ndarray,
    column_step: np.ndarray, thetas: Any, transpose: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scan-frame BF frequencies (R, B, 2) float64; the kernels' per-pixel rows
    (k_r, k_c, aperture, anchor) as float32 (R, B, 4), one 16-byte load per pixel;
    and the scan-frame step of one detector column (R, 2) float64 (vp_eval's
    recurrences advance by it from pixel to pixel, re-anchoring where anchor ≠ 0)."""
    k = np.stack([scan_frame_frequencies(bf.k_det, t, transpose) for t in thetas])
    px = np.zeros((*k.shape[:2], 4), dtype=np.float32)
    px[..., :2] = k
    px[..., 2] = aperture(k[..., 0], k[..., 1], k_alpha, edge_width, np)
    px[..., 3] = anchors
    dk = np.stack([scan_frame_frequencies(column_step, t, transpose)[0] for t in thetas])
    return np.ascontiguousarray(k), px, dk

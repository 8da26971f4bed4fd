"""Preparing a window on the device: its spectra (window means, staging, batched FFT), its
reconstruction grids and support masks, and the float32 geometry the reference reads."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...physics.apodisation import hann_2d
from ...physics.frequencies import (
    corrects_noise,
    frequencies_from_sums,
    offset_table,
    poisson_noise_energy,
    sums_by_axis,
)
from ...results import Bounds
from ...xp import to_host
from .. import cuda_kernels as ck
from ..records import PreparedSpectra, ReferenceGeometry
from ..reference import Reference
from .launch import (
    MAX_GRID_Z,
    NULL_POINTER,
    AliasExclusionArgs,
    BFComArgs,
    EffectiveSumsArgs,
    KernelGeo,
    SlotBinsArgs,
    StageWindowArgs,
    SupportMaskArgs,
    WindowMeanArgs,
    freq_blocks,
    launch,
)
from .memory import DeviceMemory, fft_plan
from .records import CUDAPart, FineGrid, RotationGeometry


def stage_spectra(
    cp: Any, memory: DeviceMemory, bf: Any, count_dtype: Any, step: tuple[float, float],
    b: Bounds, shape: tuple[int, int], h: int, w: int, n_bf: int, M: int,
    scan_frequencies: str = "effective", apodise: bool = False,
) -> PreparedSpectra[CUDAPart]:
    """Spectra of the window ``b`` (h × w measured positions) of the (B, Rr, Rc) BF
    counts ``bf``, padded to ``shape`` with the window's mean pattern: the window mean
    per pixel, then staging chunks of pixels (within the staging budget) and their
    batched R2C FFT straight into G's rows (G is a reusable buffer of ``memory``); and
    each bin's frequency (the grid's, or with "effective" the one its signal has,
    measured from G as the CPU engine does). ``apodise``: the staged (mean-removed, zero
    padded) counts weighted by the scan-window Hann first (physics.apodisation)."""
    from cupy.cuda import cufft

    Nr, Nc = shape
    Hc = Nc // 2 + 1
    G = memory.buffers.take((n_bf, M))
    try:
        mean = cp.empty(n_bf, dtype=cp.float64)
        launch(ck.kernel("window_mean", count_dtype), (n_bf,), (256,),
               WindowMeanArgs(bf, np.int32(bf.shape[1]), np.int32(bf.shape[2]),
                              np.int32(b[0]), np.int32(b[2]), np.int32(h), np.int32(w),
                              mean))
        per_pixel = Nr * Nc * 4 + M * 8 * 2  # staging in, FFT out (+ its copy)
        chunk = int(max(1, min(n_bf, memory.staging_bytes // per_pixel, MAX_GRID_Z)))
        stage = cp.zeros((chunk, Nr, Nc), dtype=cp.float32)
        stage_k = ck.kernel("stage_window", count_dtype)
        plan = fft_plan(stage, "R2C")  # one plan per shape: the last chunk is padded
        hann = (memory.constant(("hann", (h, w), shape),
                                lambda: hann_2d((h, w), shape, cp, np.float32))
                if apodise else None)
        for s in range(0, n_bf, chunk):
            n = min(chunk, n_bf - s)
            launch(stage_k, (-(-Nc // ck.NT), Nr, n), (ck.NT,),
                   StageWindowArgs(bf, np.int32(bf.shape[1]), np.int32(bf.shape[2]),
                                   np.int32(s), np.int32(b[0]), np.int32(b[2]),
                                   np.int32(h), np.int32(w), np.int32(Nr), np.int32(Nc),
                                   mean, stage))
            if hann is not None:  # the staged values are I − Ī, 0 on the padding
                stage *= hann
            if n == chunk:  # straight into G's rows: no temporary spectrum, no copy
                out = G[s:s + n].reshape(n, Nr, Hc)
                plan.check_output_array(stage, out)
                plan.fft(stage, out, cufft.CUFFT_FORWARD)
            else:  # the padded last chunk: through a temporary
                with plan:
                    spec = cp.fft.rfft2(stage)
                G[s:s + n] = spec[:n].reshape(n, M)
                del spec
        del stage
        # DC of each pixel: the window sum plus the padding's mean pattern.
        G[:, 0] = (mean * (Nr * Nc)).astype(cp.float32)
    except BaseException:
        del G
        raise
    if scan_frequencies == "effective":  # physics.frequencies, from the spectra G
        nu_r, nu_c = device_effective_frequencies(cp, memory, G, shape, (h, w), step, n_bf,
                                                  apodise, corrects_noise(count_dtype, apodise))
    else:
        nu_r, nu_c = device_half_plane_grid(cp, shape, step)
    # dc (the window's mean count × Nr·Nc) comes with the first set_rotation's download
    # (``window_dc``): no wait here, which a map tile would pay as a lockstep round.
    return PreparedSpectra(shape=shape, bounds=b, n_bf=n_bf, G=G, dc=float("nan"),
                           part=CUDAPart(nu_r, nu_c, M, pending_mean=mean), apodised=apodise)


def window_dc(mean: np.ndarray, shape: tuple[int, int]) -> float:
    """A window's dc from its downloaded mean count per BF pixel, padded to ``shape``."""
    return float(mean.mean() * (shape[0] * shape[1]))


def window_totals(mean: np.ndarray, bounds: Bounds) -> np.ndarray:
    """Each BF pixel's count summed over the window's measured positions, from its
    downloaded mean (``window_mean``: the sum in float64 over h·w, divided by h·w)."""
    r0, r1, c0, c1 = bounds
    return np.asarray(mean, dtype=np.float64) * float((r1 - r0) * (c1 - c0))


def reference_geometry(reference: Reference, sp: PreparedSpectra[CUDAPart],
                       rows: RotationGeometry) -> ReferenceGeometry:
    """float32 geometry (like the spectra) for the reference path, which stores (B, M)
    amplitudes; its k is the float64 rows (the fine reconstruction grid reads them)."""
    ref = reference.half_plane(sp.shape)
    # The window's own bin frequencies (the grid's, or effective ones), as the kernels
    # read them, in the reference's precision.
    ref.nu_r, ref.nu_c = (sp.part.nu_r.astype(reference.real_dtype),
                          sp.part.nu_c.astype(reference.real_dtype))
    ref.k = rows.k64
    ref.grids = [reference.grid(rows.k64[sl].astype(np.float32), ref.nu_r, ref.nu_c)[1]
                 for sl in reference.chunks(sp.n_bf, sp.G.shape[1])]
    return ref


def fine_grid(cp: Any, part: CUDAPart, shape: tuple[int, int], step: tuple[float, float],
              f: int) -> FineGrid:
    """Per-bin frequencies and row alias of the f-times finer grid of a window of
    ``shape``; at f = 1 the window's own bins (their effective frequencies where
    measured), as the CPU engine reconstructs."""
    Nr, Nc = shape
    Fr, Fc = f * Nr, f * Nc
    alias = (np.round(np.fft.fftfreq(Fr) * Fr).astype(np.int64) % Nr).astype(np.int32)
    if f == 1:
        return FineGrid(part.nu_r, part.nu_c, cp.asarray(alias))
    nu_r, nu_c = device_half_plane_grid(cp, (Fr, Fc), (step[0] / f, step[1] / f))
    return FineGrid(nu_r, nu_c, cp.asarray(alias))


def device_half_plane_grid(cp: Any, shape: tuple[int, int],
                           step: tuple[float, float]) -> tuple[Any, Any]:
    """``reference.half_plane_grid`` on the device: the two axes uploaded, the per-bin
    tables broadcast there (the same values; a 1536² grid's tables are 19 MB, which a
    host meshgrid and upload took ~20 ms to make)."""
    nr = cp.asarray(np.fft.fftfreq(shape[0], step[0]))
    nc = cp.asarray(np.fft.rfftfreq(shape[1], step[1]))
    H = int(nc.size)
    return (cp.ascontiguousarray(cp.broadcast_to(nr[:, None], (shape[0], H))).ravel(),
            cp.ascontiguousarray(cp.broadcast_to(nc[None, :], (shape[0], H))).ravel())


EFFECTIVE_FILL_BLOCKS = 1056  # ~8 blocks of NT threads per H200 SM
EFFECTIVE_MIN_PIXELS = 64  # BF pixels per split at least


def device_effective_frequencies(
    cp: Any, memory: DeviceMemory, G: Any, shape: tuple[int, int],
    data_shape: tuple[int, int], step: tuple[float, float], n_bf: int, apodised: bool = False,
    poisson: bool = False,
) -> tuple[Any, Any]:
    """``physics.frequencies.effective_frequencies`` of the device spectra G: the sums in
    one kernel pass (``effective_sums``), the offsets from them on the device too (the
    bins' (ν_r, ν_c) as device arrays: nothing crosses to the host). ``poisson``: the noise
    energy is taken off (``corrects_noise``; from G's DC column, a device scalar)."""
    M = shape[0] * (shape[1] // 2 + 1)
    nblk = freq_blocks(M)
    # Splits of the pixel loop so that a small window still fills the device.
    nsplit = max(1, min(-(-EFFECTIVE_FILL_BLOCKS // nblk), -(-n_bf // EFFECTIVE_MIN_PIXELS)))
    per = -(-n_bf // nsplit)
    nsplit = -(-n_bf // per)
    with memory.guard("measuring the effective scan frequencies", nsplit * 6 * M * 8):
        parts = cp.empty((nsplit, 6, M), dtype=cp.float64)
    launch(ck.function("effective_sums"), (nblk, nsplit), (ck.NT,),
           EffectiveSumsArgs(G, np.int32(n_bf), np.int32(shape[0]), np.int32(shape[1]),
                             np.int32(per), parts))
    # parts.sum: a fixed-order reduction, the same sums on every run
    energy, cross = sums_by_axis(parts.sum(axis=0))
    grid_r, grid_c = memory.constant(("half_plane_grid", shape, step),
                                     lambda: device_half_plane_grid(cp, shape, step))

    def tables(n: int, n_grid: int) -> tuple[Any, Any]:  # apodised: the Hann's (±1.5 bins)
        return memory.constant(("offset_table", n, n_grid, apodised), lambda: tuple(
            cp.asarray(t) for t in offset_table(n, n_grid, apodised)))

    noise = poisson_noise_energy(G, data_shape, shape, apodised, cp) if poisson else None
    return frequencies_from_sums(energy, cross, shape, data_shape, step, grid_r, grid_c,
                                 xp=cp, tables=tables, noise=noise)


ALIAS_TABLES_KEPT = 3  # per window: the branch θ, its mirror θ + π and the θ scan's held one


def alias_exclusion_table(cp: Any, memory: DeviceMemory, part: CUDAPart, n_bf: int,
                          rows: RotationGeometry, geo: KernelGeo) -> Any:
    """The window's exclusion table at the rotation of ``rows`` where alias pixels are
    left out ("excluded" on an undersampled scan): bit i of uint32 word w of row m set where
    the walks leave the pair (BF pixel 32w + i, bin m) out, because it shares the support of
    an alias of bin m (the kernels' ``alias_exclusion``: the test the walks made pair by
    pair) or lies outside the trotter by a margin; rows of ceil(n_bf / BT) uint4;
    NULL_POINTER where every pair is kept. Kept per window for its last rotations."""
    if not geo.aliased:
        return NULL_POINTER
    tables = part.alias_tables
    if rows not in tables:
        if len(tables) >= ALIAS_TABLES_KEPT:
            tables.pop(next(iter(tables)))
        words = 4 * -(-n_bf // ck.BT)
        with memory.guard("building the alias pixels' exclusion table", part.M * words * 4):
            table = cp.empty(part.M * words, dtype=cp.uint32)
        launch(geo.function("alias_exclusion"), (-(-part.M * words // ck.NT),), (ck.NT,),
               AliasExclusionArgs(np.int32(n_bf), np.int32(part.M), part.nu_r, part.nu_c,
                                  rows.k64, rows.px, geo.g_ka2, geo.g_ka, geo.g_inv_w,
                                  geo.g_twopilam, geo.g_alias, table))
        tables[rows] = table
    return tables[rows]


def support_masks(
    cp: Any, memory: DeviceMemory, n_bf: int, rows: RotationGeometry, nu_r: Any, nu_c: Any,
    M: int, H: int, geo: KernelGeo, lobes: tuple[int, ...] = (-1,),
    tile_rows: int = ck.TILE_R, alias_tab: Any = NULL_POINTER,
) -> tuple[Any, int]:
    """Per-warp masks of the pixels that may be in the trotter (lobe -1) or one trotter
    lobe (0: k-ν, 1: k+ν) of some frequency of the warp, for the M frequencies (ν_r,
    ν_c) of a grid of H columns at the current rotation (a warp's frequencies: the
    kernels' ``slot_bin`` tile of ``tile_rows`` rows, as the consumer takes them), one
    block of rows per entry of ``lobes``: (uint32 (len(lobes)·rows·tiles·4), tiles per
    row). ``alias_tab`` (the grid's ``alias_exclusion_table``): a pixel that no frequency
    of a warp takes is left out of its mask too."""
    nblk = freq_blocks(M)
    tiles = -(-n_bf // ck.BT)
    words = nblk * ck.NT // 32 * tiles * 4
    with memory.guard("building the support masks", len(lobes) * words * 4):
        masks = cp.empty(len(lobes) * words, dtype=cp.uint32)
    for i, lobe in enumerate(lobes):
        launch(ck.function("support_mask"), (nblk,), (ck.NT,),
               SupportMaskArgs(np.int32(n_bf), np.int32(M), np.int32(H), np.int32(tile_rows),
                               nu_r, nu_c, rows.px, geo.g_ka2, geo.g_ka, np.int32(lobe),
                               alias_tab, masks[i * words:]))
    return masks, tiles


def slot_bin_map(cp: Any, rows: int, H: int, tile_rows: int, extra: int = 0) -> np.ndarray:
    """The bin each thread slot of a ν-parallel launch over a (rows, H) half plane owns
    with warp tiles of ``tile_rows`` rows (the kernels' ``slot_bin``), for rows·H +
    ``extra`` slots: a check of the device code against its mirror
    ``cuda_kernels.slot_bins`` (slots past the grid get bins ≥ rows·H: inactive threads)."""
    n = rows * H + extra
    out = cp.full(n, -1, dtype=cp.int32)
    launch(ck.function("slot_bins"), (-(-n // ck.NT),), (ck.NT,),
           SlotBinsArgs(np.int32(n), np.int32(rows), np.int32(H), np.int32(tile_rows), out))
    got: np.ndarray = to_host(out, "slot_bin_map")
    return got


def subset_mask_words(keep: np.ndarray, tiles: int) -> np.ndarray:
    """A support-mask row (uint32, tiles·4 words: word q of tile t, bit i = pixel
    128t + 32q + i, as ``support_mask`` writes) with the bits of the pixels in ``keep``
    set: ANDed into every row of a mask, the masked walk visits those pixels only, in
    index order (a reconstruction over a subset of the BF pixels)."""
    bits = np.zeros(tiles * ck.BT, dtype=np.uint64)
    bits[:keep.size] = keep.astype(np.uint64)
    words = (bits.reshape(tiles * 4, 32) << np.arange(32, dtype=np.uint64)).sum(axis=1)
    out: np.ndarray = words.astype(np.uint32)
    return out


def pattern_centres_of_mass(cp: Any, bf_counts: Any, k_px: Any) -> np.ndarray:
    """COM of each pattern over the (B, Rr, Rc) BF counts, detector px: (Rr, Rc, 2)."""
    B, Rr, Rc = bf_counts.shape
    P = Rr * Rc
    out = cp.empty((P, 2), dtype=cp.float64)
    launch(ck.kernel("bf_com", bf_counts.dtype), (-(-P // 256),), (256,),
           BFComArgs(bf_counts, np.int32(B), np.int64(P), k_px, out))
    com: np.ndarray = to_host(out, "bf_center_of_mass").reshape(Rr, Rc, 2)
    return com

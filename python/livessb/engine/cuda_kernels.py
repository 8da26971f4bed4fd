"""Load and compile the CUDA kernels of ``kernels/`` (CuPy RawModule, NVRTC).

Compiled once per process (and cached on disk by CuPy). Importing this module does
not import CuPy; ``module()`` does.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

KERNELS = Path(__file__).with_name("kernels")
# One translation unit, in this order: each file uses the definitions of those before it.
KERNEL_FILES = ("common.cu", "walk.cu", "vp_eval.cu", "vp_derivs.cu", "energy_masks.cu",
                "reconstruct.cu", "prepare.cu", "virtual.cu", "descan.cu", "frequencies.cu")
# Candidates per thread in vp_eval<KC>. Eight (sums in dynamic shared memory, 2 blocks
# per SM) ran slower on the H200: 2.27 ms per candidate against 1.94 for four.
EVAL_GROUPS = (1, 2, 4)
# Candidates (a map's tiles) per thread in reconstruct_kernel<K>: the walk, the spectra
# loads and the pair geometry are shared by the K.
RECON_GROUPS = (1, 2, 4)
# Rotations per thread of a θ grid's launch (vp_eval<ROTATION_GROUP, true>): the walk and
# the spectra loads shared, each rotation's sums in the direct form of one per thread.
ROTATION_GROUP = 4
COUNT_TYPES = {
    np.dtype(np.uint8): "unsigned char",
    np.dtype(np.uint16): "unsigned short",
    np.dtype(np.uint32): "unsigned int",
    np.dtype(np.float32): "float",
}
NT = 128  # threads per block of the ν-parallel kernels (matches the source)
NQ = 28  # loss + 6 gradient + 21 Hessian terms
N_PER_NU = 8  # vp_derivs' per-ν terms: loss, 6 gradient terms, the C10 curvature
NS = 6  # vp_eval's float64 sums per candidate and ν: N, D of each trotter lobe
NA = 55  # derivative sums per frequency (float64 in shared memory)
BT = 128  # BF pixels per tile (matches the source)
GATHER_TILE = 64  # positions and BF pixels per block of gather_bf (GT in the source)

ANCHOR_PIXELS = 16  # vp_eval re-anchors its phase recurrences at least this often in a row
TILE_R, TILE_C = 4, 8  # a warp's frequencies: a tile of rows × columns (slot_bin)
RECON_STRIP_MAX_K = 1  # reconstructions of up to this many candidates take strips of 32


def recon_tile_rows(group: int) -> int:
    """Rows of a warp's tile in reconstruct_kernel<group> (RECON_TILE_R in the source):
    strips where one candidate's light pairs make the loads the cost, tiles above."""
    return 1 if group <= RECON_STRIP_MAX_K else TILE_R


def slot_bins(rows: int, H: int, tile_rows: int = TILE_R) -> np.ndarray:
    """The ν-parallel kernels' ``slot_bin`` (walk.cu) of every slot of a (rows, H) half
    plane: thread slot s owns bin ``out[s]`` (row-major m = row·H + col). Warps take
    tiles of ``tile_rows`` × 32 / ``tile_rows``; the columns right of the last whole
    tile, then the rows below it, take the rest, column by column and row by row. One
    row (strips) is the identity: 32 consecutive bins, aligned in G."""
    if tile_rows == 1:
        return np.arange(rows * H, dtype=np.int64)
    tr, tc = tile_rows, 32 // tile_rows
    Hm, Rm = H - H % tc, rows - rows % tr
    s = np.arange(Rm * Hm)
    t, lane = s // 32, s % 32
    per_band = max(Hm // tc, 1)
    tiled = ((t // per_band) * tr + lane // tc) * H + (t % per_band) * tc + lane % tc
    e = np.arange(rows * (H - Hm))
    right = (e % rows) * H + Hm + e // rows
    e = np.arange((rows - Rm) * Hm)
    below = (Rm + e // max(Hm, 1)) * H + e % max(Hm, 1)
    out: np.ndarray = np.concatenate([tiled, right, below]).astype(np.int64)
    return out


def _follows(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """True where a BF pixel is its predecessor's right neighbour in the same detector row."""
    out = np.zeros(len(rows), dtype=bool)
    out[1:] = (rows[1:] == rows[:-1]) & (cols[1:] == cols[:-1] + 1)
    return out


def recurrence_anchors(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """1.0 where vp_eval restarts its recurrences with an exact sincos, else 0.0: each
    pixel that does not follow its predecessor in its detector row, every ANCHOR_PIXELS-th
    pixel of a row run, and each tile start (so a walk over any tile range starts on one)."""
    idx = np.arange(len(rows))
    follows = _follows(rows, cols)
    run_start = np.maximum.accumulate(np.where(follows, 0, idx))
    anchor = ~follows | ((idx - run_start) % ANCHOR_PIXELS == 0) | (idx % BT == 0)
    return anchor.astype(np.float32)


def column_step(k_det: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """(1, 2) detector-frame frequency step from a BF pixel to its right neighbour (0 when
    no pixel has one: then every pixel is an anchor and the step is never used)."""
    i = np.flatnonzero(_follows(rows, cols))
    if i.size == 0:
        return np.zeros((1, 2))
    return np.mean(k_det[i] - k_det[i - 1], axis=0, keepdims=True)


def eval_kernel_name(group: int, rotations: bool = False) -> str:
    """vp_eval for ``group`` candidates per thread, or one candidate at ``group``
    rotations per thread."""
    return f"vp_eval<{group}, {'true' if rotations else 'false'}>"


def reconstruct_kernel_name(group: int, thin: bool = False) -> str:
    """reconstruct_kernel for ``group`` candidates (a map's tiles) per thread; ``thin``:
    every candidate has depth 0 (the sinc skipped, the same bits)."""
    return f"reconstruct_kernel<{group}, {'true' if thin else 'false'}>"


def _names() -> list[str]:
    names = [eval_kernel_name(k) for k in EVAL_GROUPS]
    names += [eval_kernel_name(ROTATION_GROUP, rotations=True)]
    names += [reconstruct_kernel_name(k, t) for k in RECON_GROUPS for t in (False, True)]
    names += ["vp_derivs", "vp_eval_finish", "vp_derivs_finish", "energy_kernel", "support_mask",
              "alias_exclusion", "fma_peak", "effective_sums", "slot_bins"]
    for t in COUNT_TYPES.values():
        names += [f"stage_window<{t}>", f"window_mean<{t}>", f"bf_com<{t}>", f"gather_bf<{t}>",
                  f"detector_sums<{t}>", f"descan_moments<{t}>"]
    return names


def source() -> str:
    """The kernels' CUDA source as one text."""
    return "".join((KERNELS / name).read_text() for name in KERNEL_FILES)


def module(alias: bool = False) -> Any:
    """The compiled kernels; ``alias``: the variant that leaves out the BF pixels an alias
    shares (``-DALIAS_PIXELS=1``, for alias_pixels="excluded" on an undersampled scan),
    compiled only when a session asks for it. Without it the same instructions as before
    the option existed (the default kernels ignore their alias argument)."""
    return _compiled(bool(alias))  # one entry per variant: module() is module(False)


@functools.lru_cache(maxsize=2)
def _compiled(alias: bool) -> Any:
    import cupy as cp

    options = ("-std=c++17",) + (("-DALIAS_PIXELS=1",) if alias else ())
    mod = cp.RawModule(code=source(), options=options, name_expressions=_names())
    mod.compile()
    return mod


# Compiled kernels by name, of the module they came from, per variant: RawModule.get_function
# costs ~15 µs a call, ~40 times per map tile (benchmarks/kernel_variants.py swaps the module).
_FUNCTIONS: dict[bool, tuple[Any, dict[str, Any], dict[str, int]]] = {}


def function(name: str, dynamic_shared_bytes: int = 0, alias: bool = False) -> Any:
    """The compiled kernel ``name`` (a full name expression) of ``module(alias)``, looked up
    once; ``dynamic_shared_bytes`` raises its dynamic shared-memory limit to that once."""
    mod = module(alias)
    cached = _FUNCTIONS.get(alias)
    if cached is None or cached[0] is not mod:
        cached = _FUNCTIONS[alias] = (mod, {}, {})
    _, found, shared = cached
    fn = found.get(name)
    if fn is None:
        fn = found[name] = mod.get_function(name)
    if dynamic_shared_bytes > shared.get(name, 0):
        if fn.max_dynamic_shared_size_bytes < dynamic_shared_bytes:
            fn.max_dynamic_shared_size_bytes = dynamic_shared_bytes
        shared[name] = dynamic_shared_bytes
    return fn


def kernel(name: str, count_dtype: Any = None) -> Any:
    """A compiled kernel by name; templated ones take the counts dtype."""
    if count_dtype is not None:
        name = f"{name}<{COUNT_TYPES[np.dtype(count_dtype)]}>"
    return function(name)


def geo_args(k_alpha: float, edge_width: float, wavelength: float) -> tuple[Any, ...]:
    """(ka2, ka, 1/w, 2πλ) as the kernels' scalar arguments."""
    return (np.float64(k_alpha**2), np.float32(k_alpha), np.float32(1.0 / edge_width),
            np.float32(2.0 * np.pi * wavelength))

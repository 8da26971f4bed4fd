"""The derivative kernels' launch: one vp_derivs (+ its finish when the BF pixels are
split) over a batch of candidates, shared by the Hessian/gradient path and the
per-frequency gradients of the misfit errors (fit/robust)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ...physics import objective as obj
from .. import cuda_kernels as ck
from .launch import (
    DERIV_SHARED_BYTES,
    FILL_BLOCKS_DERIV,
    NULL_POINTER,
    VpDerivsFinishArgs,
    candidate_table,
    freq_blocks,
    launch,
    pixel_split,
    vp_derivs_args,
)
from .prepare import support_masks

if TYPE_CHECKING:
    from .engine import CUDAEngine, DeviceSpectra
    from .records import CUDAPart


def derivative_launch(engine: CUDAEngine, sp: DeviceSpectra, cand: np.ndarray,
                      per_nu: Any) -> Any:
    """The block partials (2K, NQ, nblk) of a (K, 6) batch, on the device (nothing is
    downloaded or synchronised here); ``per_nu`` (2K, N_PER_NU, M) float64, when given,
    gets each frequency's loss, gradient and C10-curvature terms."""
    cp = engine.cp
    K = len(cand)
    w, g = engine._at_rotation(sp)
    M = sp.part.M
    nblk = freq_blocks(M)
    part = cp.empty((2 * K, ck.NQ, nblk), dtype=cp.float64)  # per (candidate, lobe)
    fn = ck.module().get_function("vp_derivs")
    smem = DERIV_SHARED_BYTES
    fin = ck.module().get_function("vp_derivs_finish")
    for f in (fn, fin):
        if f.max_dynamic_shared_size_bytes < smem:
            f.max_dynamic_shared_size_bytes = smem
    # Few candidates (a Newton start refined last) fill the device only split.
    per, nsplit = pixel_split(M, sp.n_bf, min_blocks=FILL_BLOCKS_DERIV // (2 * K))
    table = cp.asarray(candidate_table(cand))
    raw = cp.empty((2 * K, nsplit, 3 + ck.NA, M) if nsplit > 1 else 1, dtype=cp.float64)
    if sp.part.lobe_masks is None:  # per rotation
        sp.part.lobe_masks = support_masks(cp, engine.memory, sp.n_bf, g, w.nu_r, w.nu_c, M,
                                           engine._kgeo, lobes=(0, 1))
    masks, tiles = sp.part.lobe_masks
    split = nsplit > 1
    # The epilogue runs in the finish kernel when split, else in vp_derivs itself.
    launch(fn, (2 * K, nblk, nsplit), (ck.NT,),
           vp_derivs_args(w, g.k64, g.px, table, engine._kgeo, part, per, raw, masks, tiles,
                          None if split else per_nu),
           shared_mem=smem)
    if split:
        launch(fin, (2 * K, nblk), (ck.NT,),
               VpDerivsFinishArgs(raw, np.int32(nsplit), np.int32(M), w.Nc, w.nu_r, w.nu_c,
                                  table, engine._kgeo.g_ka2, engine._kgeo.pilam, part,
                                  NULL_POINTER if per_nu is None else per_nu),
               shared_mem=smem)
    return part


def misfit_sums(cp: Any, per_nu: Any, radial: tuple[Any, Any]) -> Any:
    """From ``derivative_launch``'s per-ν terms (2, N_PER_NU, M) of one candidate: each
    ν's gradient terms (6, M), the two frequency bands' sums of the loss and gradient
    terms (2, 7) and their counts of entries with signal (2,), one device array of
    6M + 16, the lobes added (a frequency's lobes share its band; ``radial`` the
    window's ``physics.objective.radial_order`` on the device; fit/systematic)."""
    both = per_nu[0] + per_nu[1]
    high = obj.frequency_bands(radial[0], radial[1], both[7], cp)  # 7: the C10 curvature
    in_band = cp.stack([~high, high], axis=1).astype(cp.float64)  # (M, 2): low, high
    entries = (per_nu[:, 0] > 0).sum(axis=0).astype(cp.float64)  # term 0: w|N|²/D
    return cp.concatenate([both[1:7].ravel(), (both[:7] @ in_band).T.ravel(),
                           entries @ in_band])


def window_radial(cp: Any, part: CUDAPart, shape: tuple[int, int],
                  step: tuple[float, float]) -> tuple[Any, Any]:
    """The window's ``physics.objective.radial_order`` on the device: sorted on the host
    once per shape (every map tile shares it), uploaded once per window."""
    if part.radial is None:
        radius, order = obj.radial_order((int(shape[0]), int(shape[1])),
                                         (float(step[0]), float(step[1])))
        part.radial = (cp.asarray(radius), cp.asarray(order))
    return part.radial

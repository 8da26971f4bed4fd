"""The derivative kernels' launch: one vp_derivs (+ its finish when the BF pixels are
split) over a batch of candidates, shared by the Hessian/gradient path and the
per-frequency gradients of the misfit errors (fit/robust)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ...params import N_JOINT
from ...physics.overlap import PAIRS
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
    smem = DERIV_SHARED_BYTES
    fn = engine._kgeo.function("vp_derivs", smem)
    fin = engine._kgeo.function("vp_derivs_finish", smem)
    # Few candidates (a Newton start refined last) fill the device only split.
    per, nsplit = pixel_split(M, sp.n_bf, min_blocks=FILL_BLOCKS_DERIV // (2 * K))
    table = cp.asarray(candidate_table(cand))
    raw = cp.empty((2 * K, nsplit, 3 + ck.NA, M) if nsplit > 1 else 1, dtype=cp.float64)
    alias_tab = engine._alias_table(sp, g)
    if sp.part.lobe_masks is None:  # per rotation
        sp.part.lobe_masks = support_masks(cp, engine.memory, sp.n_bf, g, w.nu_r, w.nu_c, M,
                                           int(w.Nc) // 2 + 1, engine._kgeo, lobes=(0, 1),
                                           alias_tab=alias_tab)
    masks, tiles = sp.part.lobe_masks
    split = nsplit > 1
    # The epilogue runs in the finish kernel when split, else in vp_derivs itself.
    launch(fn, (2 * K, nblk, nsplit), (ck.NT,),
           vp_derivs_args(w, g.k64, g.px, alias_tab, table, engine._kgeo, part, per, raw,
                          masks, tiles, None if split else per_nu),
           shared_mem=smem)
    if split:
        launch(fin, (2 * K, nblk), (ck.NT,),
               VpDerivsFinishArgs(raw, np.int32(nsplit), np.int32(M), w.Nc, w.nu_r, w.nu_c,
                                  table, engine._kgeo.g_ka2, engine._kgeo.pilam, part,
                                  NULL_POINTER if per_nu is None else per_nu),
               shared_mem=smem)
    return part


_PAIR_ROWS = np.array([i for i, _ in PAIRS])  # vp_derivs' Hessian terms, in PAIRS order
_PAIR_COLS = np.array([j for _, j in PAIRS])


def derivatives_from_partials(partials: np.ndarray, K: int, energy: float, nblk: int,
                              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Loss (K,), gradient (K, 6) and Hessian (K, 6, 6) from vp_derivs' block partials
    (2K, NQ, nblk) on the host: both lobes and every block added."""
    s = partials.reshape(K, 2, ck.NQ, nblk).sum(axis=(1, 3))
    losses = 1.0 - s[:, 0] / energy
    grads = -s[:, 1:7] / energy
    hess = np.empty((K, N_JOINT, N_JOINT))
    pair_terms = -s[:, 7:7 + len(PAIRS)] / energy
    hess[:, _PAIR_ROWS, _PAIR_COLS] = pair_terms  # both triangles, one fancy write each
    hess[:, _PAIR_COLS, _PAIR_ROWS] = pair_terms
    return losses, grads, hess

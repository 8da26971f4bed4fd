"""The CUDA engine's reconstruction: the f-times finer half plane's geometry and support
masks (kept per factor and rotation on the spectra's part), one launch of
``reconstruct_kernel<K, THIN>`` for K candidates (a map's tiles share the walk; THIN where
every depth is 0) and the inverse FFTs. Owned by the engine (``CUDAEngine._recon``),
rebuilt with its geometry.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...params import JOINT, to_vector
from ...results import Bounds
from ...xp import to_host
from .. import cuda_kernels as ck
from ..records import PreparedSpectra
from ..reference import RECON_EPS, Reference, cropped
from .launch import NULL_POINTER, KernelGeo, ReconstructArgs, Window, candidate_table, launch
from .memory import DeviceMemory
from .prepare import alias_exclusion_table, fine_grid, subset_mask_words, support_masks
from .records import CUDAPart, FineMasks, RotationGeometry
from .timing import add_seconds

_DEPTH = JOINT.index("depth")


def all_thin(vec: np.ndarray) -> bool:
    """Whether every candidate row (JOINT order) has depth 0: the kernel's THIN variant,
    which skips the sinc that is exactly 1 there (the same bits)."""
    return bool(np.all(vec[:, _DEPTH] == 0.0))


@dataclass(frozen=True)
class Reconstructor:
    cp: Any
    memory: DeviceMemory
    kgeo: KernelGeo
    reference: Reference
    stats: dict[str, float]
    step: tuple[float, float]

    def images(self, sp: PreparedSpectra[CUDAPart], w: Window, g: RotationGeometry,
               params: list[dict[str, float]], f: int, method: str, resident: bool,
               keep: np.ndarray | None = None, crop: Bounds | None = None) -> Any:
        """Images of len(params) ∈ ck.RECON_GROUPS candidates from one launch (device
        arrays where ``resident``, else the one image downloaded); ``keep``: the BF
        pixels that enter the sums (None: all); ``crop``: each image's part (output px)."""
        cp = self.cp
        Nr, Nc = sp.shape
        Fr, Fc = f * Nr, f * Nc
        Hf = Fc // 2 + 1
        part = sp.part
        if f not in part.fine:
            part.fine[f] = fine_grid(cp, part, sp.shape, self.step, f)
        fine = part.fine[f]
        K = len(params)
        tile_rows = ck.recon_tile_rows(K)
        # The scan's own grid leaves out the alias pixels as the fit does (finer grids'
        # frequencies are the aliases themselves)
        alias_tab = NULL_POINTER if f > 1 else alias_exclusion_table(
            cp, self.memory, part, sp.n_bf, g, self.kgeo)
        masks = part.fine_masks.get(tile_rows)
        if masks is None or masks.upsample != f:  # per rotation
            masks = part.fine_masks[tile_rows] = FineMasks(f, tile_rows, *support_masks(
                cp, self.memory, sp.n_bf, g, fine.nu_r, fine.nu_c, Fr * Hf, Hf, self.kgeo,
                tile_rows=tile_rows, alias_tab=alias_tab))
        words, n_sum = masks.masks, sp.n_bf
        if keep is not None:  # a BF-pixel subset: the walk skips the others' pairs
            with self.memory.guard("masking the BF-pixel subset", int(words.nbytes)):
                words = (words.reshape(-1, masks.tiles * 4) & cp.asarray(
                    subset_mask_words(keep, masks.tiles))).ravel()
            n_sum = int(np.count_nonzero(keep))
        vec = np.stack([to_vector(p, JOINT, default=0.0) for p in params])
        MF = Fr * Hf
        kg = self.kgeo
        with self.memory.guard(f"reconstructing on the {Fr}x{Fc} grid", K * MF * 8 * 3):
            O = cp.empty((K, MF), dtype=cp.complex64)
            ev = [cp.cuda.Event() for _ in range(3)]
            ev[0].record()
            launch(kg.function(ck.reconstruct_kernel_name(K, all_thin(vec))),
                   (-(-MF // ck.NT),), (ck.NT,),
                   ReconstructArgs(
                       w.G, w.B, w.M, w.Nr, w.Nc, np.int32(Fr), np.int32(Fc), fine.nu_r,
                       fine.nu_c, fine.alias, g.k64, g.px, words, np.int32(masks.tiles),
                       cp.asarray(candidate_table(vec)), kg.g_ka2, kg.g_ka, kg.g_inv_w,
                       kg.g_twopilam, kg.g_alias, alias_tab, kg.pilam, np.float32(RECON_EPS),
                       np.int32(0 if method == "ssb" else 1), np.int32(n_sum), O))
            ev[1].record()
            images = [cropped(self.reference.object_spectrum_to_image(sp, O[k], f),
                              crop).astype(np.complex64) for k in range(K)]
            ev[2].record()
            if resident:  # stays on the device (a map's blend): no download, no wait
                return images
            t0 = time.perf_counter()
            out: np.ndarray = to_host(images[0], "reconstruct")
            st = self.stats
            add_seconds(st, "reconstruct_kernel_s", cp.cuda.get_elapsed_time(ev[0], ev[1]) / 1e3)
            add_seconds(st, "reconstruct_ifft_s", cp.cuda.get_elapsed_time(ev[1], ev[2]) / 1e3)
            add_seconds(st, "reconstruct_download_s", time.perf_counter() - t0)
        return out

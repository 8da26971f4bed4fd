"""The CUDA engine's typed part of a prepared-spectra record, and its device rows."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class RotationGeometry:
    """Device rows of one rotation, shared by every window at it (geometry does not
    depend on the window): scan-frame BF frequencies, per-pixel rows, column step."""

    k64: Any  # (B, 2) float64
    px: Any  # (B, 4) float32: k_r, k_c, aperture, anchor (one 16-byte load per pixel)
    dk: Any  # (2,) float64 scan-frame step of one detector column

    def arrays(self) -> list[Any]:
        return [self.k64, self.px, self.dk]


@dataclass(eq=False)
class FineGrid:
    """Frequencies of the f-times finer reconstruction grid and its row alias (per
    upsampling factor; independent of the rotation)."""

    nu_r: Any  # (f·Nr·(f·Nc//2+1),) float64 per bin, row-major
    nu_c: Any  # likewise
    alias: Any  # (f·Nr,) int32 coarse row of each fine row


@dataclass(eq=False)
class FineMasks:
    """Per-warp support masks of the reconstruction grid at the current rotation."""

    upsample: int
    tile_rows: int  # the warps' tiles they were built for (cuda_kernels.recon_tile_rows)
    masks: Any  # uint32 (rows·tiles·4)
    tiles: int  # tiles of BT pixels per mask row


@dataclass(eq=False)
class CUDAPart:
    """What the CUDA engine keeps per window besides the common record."""

    nu_r: Any  # (M,) float64 per bin on the device (grid or effective frequencies)
    nu_c: Any  # likewise
    M: int  # half-plane frequencies, Nr·(Nc//2+1)
    geometry: RotationGeometry | None = None  # at the current rotation
    # The fit returns to rotations it has visited (branch θ, its mirror θ+π): their
    # energies and in-trotter pair counts are kept per window, computed once.
    energies: dict[tuple[float, bool], tuple[float, int]] = field(default_factory=dict)
    pairs: int = 0  # in-trotter (b, ν) pairs at the current rotation
    fine: dict[int, FineGrid] = field(default_factory=dict)  # by upsampling factor
    # The current rotation's reconstruction masks by warp tile rows (strips for one
    # candidate, tiles for a map's batches); set_rotation drops them.
    fine_masks: dict[int, FineMasks] = field(default_factory=dict)
    # vp_derivs' per-lobe masks of this window's grid at the current rotation (likewise):
    # (uint32 masks of lobe 0 then lobe 1, tiles per row)
    lobe_masks: tuple[Any, int] | None = None
    # alias_pixels="excluded": the exclusion table of this window's grid per rotation's
    # rows (prepare.alias_exclusion_table), the last few
    alias_tables: dict[RotationGeometry, Any] = field(default_factory=dict)
    # The window's mean count per BF pixel (n_bf,) float64 on the device until the first
    # energy download brings it along for the record's dc (one wait less per window).
    pending_mean: Any = None

    def energy_at(self, theta: float, transpose: bool) -> tuple[float, int] | None:
        """The kept energy and pair count of θ, or of a visited θ ± π: there every BF
        frequency k is -k, which swaps the trotter's two discs (|k ∓ ν| ≤ kα) and keeps
        its pairs, so the sideband energy is the same sum of the same terms (the device
        test holds it bit for bit); None where neither is kept."""
        if (theta, transpose) in self.energies:
            return self.energies[theta, transpose]
        for (t, tr), value in self.energies.items():
            if tr == transpose and abs(abs(math.remainder(theta - t, 2 * math.pi))
                                       - math.pi) < 1e-12:
                return value
        return None

    def arrays(self) -> list[Any]:
        """Every array this part references (device arrays and others; callers count the
        distinct device ones)."""
        out = [self.nu_r, self.nu_c]
        if self.geometry is not None:
            out += self.geometry.arrays()
        for g in self.fine.values():
            out += [g.nu_r, g.nu_c, g.alias]
        out += [fm.masks for fm in self.fine_masks.values()]
        if self.lobe_masks is not None:
            out.append(self.lobe_masks[0])
        out += list(self.alias_tables.values())
        if self.pending_mean is not None:
            out.append(self.pending_mean)
        return out

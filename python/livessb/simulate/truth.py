"""The simulation's truth record: every parameter the forward model used."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .lattice import SRTIO3_BASIS, _lattice_peak, _lattice_potential_points

Bounds = tuple[int, int, int, int]


@dataclass
class SimulationTruth:
    """Everything the forward model used.

    ``params`` holds the six fit parameters (``C10`` at the scan centre and the
    slab mid-plane, ``C12``, ``phi12``, ``tilt_row_mrad``, ``tilt_col_mrad``,
    ``depth``) plus any higher-order coefficient that was given.
    """

    params: dict[str, float]
    rotation_deg: float
    transpose: bool
    defocus_gradient: tuple[float, float]
    phase_peak_rad: float
    voltage_kV: float
    semiangle_mrad: float
    scan_step_A: tuple[float, float]
    scan_shape: tuple[int, int]
    detector_shape: tuple[int, int]
    detector_sampling_mrad: float
    bf_center_px: tuple[float, float]
    wavelength_A: float
    sim_window_px: int
    sim_pixel_A: float
    n_slices: int
    slice_thickness_A: float
    dose: float | None
    seed: int
    lattice_A: float
    atom_sigma_A: float
    lattice_origin_A: tuple[float, float]
    basis: tuple[tuple[float, float, float], ...] = SRTIO3_BASIS
    extra: dict[str, Any] = field(default_factory=dict)

    def local_C10(self, bounds: Bounds) -> float:
        """True C10 at the centre of the region ``(r0, r1, c0, c1)`` (stops exclusive).

        The defocus varies linearly across the scan, so this is also the mean
        C10 over the region's positions.
        """
        r0, r1, c0, c1 = (int(b) for b in bounds)
        if not (r1 > r0 and c1 > c0):
            raise ValueError(f"empty region bounds {bounds!r}")
        nr, nc = self.scan_shape
        gr, gc = self.defocus_gradient
        row = 0.5 * (r0 + r1 - 1) - 0.5 * (nr - 1)
        col = 0.5 * (c0 + c1 - 1) - 0.5 * (nc - 1)
        return float(self.params["C10"] + gr * row + gc * col)

    def local_params(self, bounds: Bounds) -> dict[str, float]:
        """``params`` with C10 replaced by :meth:`local_C10` of the region."""
        out = dict(self.params)
        out["C10"] = self.local_C10(bounds)
        return out

    def C10_map(self) -> np.ndarray:
        """True C10 at every scan position, shape ``scan_shape`` (Å)."""
        nr, nc = self.scan_shape
        gr, gc = self.defocus_gradient
        i = np.arange(nr)[:, None] - 0.5 * (nr - 1)
        j = np.arange(nc)[None, :] - 0.5 * (nc - 1)
        return self.params["C10"] + gr * i + gc * j

    def descan_map(self) -> np.ndarray:
        """True BF disk shift (detector px) at every scan position, (Rr, Rc, 2) (row, col);
        zero without descan."""
        from .acquisition import check_descan, descan_field

        a, off = check_descan(self.extra.get("descan_px_per_px", (0.0,) * 4),
                              self.extra.get("descan_offset_px", (0.0, 0.0)))
        return descan_field(self.scan_shape, a, off).reshape(*self.scan_shape, 2)

    def phase(self, rows_A: Any, cols_A: Any) -> np.ndarray:
        """Total projected phase (rad) of the object at positions (Å), thin limit.

        Broadcasts ``rows_A`` against ``cols_A``. This is the σV(r) of the
        transmission function summed over all slices (without slice shifts).
        """
        r = np.asarray(rows_A, dtype=np.float64)
        c = np.asarray(cols_A, dtype=np.float64)
        pot = _lattice_potential_points(
            r, c, self.lattice_A, self.atom_sigma_A, self.lattice_origin_A, self.basis)
        return self.phase_peak_rad * pot / _lattice_peak(
            self.lattice_A, self.atom_sigma_A, self.basis)

    def to_dict(self) -> dict[str, Any]:
        return {
            "params": {k: float(v) for k, v in self.params.items()},
            "rotation_deg": float(self.rotation_deg),
            "transpose": bool(self.transpose),
            "defocus_gradient": [float(g) for g in self.defocus_gradient],
            "phase_peak_rad": float(self.phase_peak_rad),
            "voltage_kV": float(self.voltage_kV),
            "semiangle_mrad": float(self.semiangle_mrad),
            "scan_step_A": [float(s) for s in self.scan_step_A],
            "scan_shape": [int(s) for s in self.scan_shape],
            "detector_shape": [int(s) for s in self.detector_shape],
            "detector_sampling_mrad": float(self.detector_sampling_mrad),
            "bf_center_px": [float(c) for c in self.bf_center_px],
            "wavelength_A": float(self.wavelength_A),
            "sim_window_px": int(self.sim_window_px),
            "sim_pixel_A": float(self.sim_pixel_A),
            "n_slices": int(self.n_slices),
            "slice_thickness_A": float(self.slice_thickness_A),
            "dose": None if self.dose is None else float(self.dose),
            "seed": int(self.seed),
            "lattice_A": float(self.lattice_A),
            "atom_sigma_A": float(self.atom_sigma_A),
            "lattice_origin_A": [float(o) for o in self.lattice_origin_A],
            "basis": [list(b) for b in self.basis],
            "extra": dict(self.extra),
        }

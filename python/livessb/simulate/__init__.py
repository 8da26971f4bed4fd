"""4D-STEM forward model with known truth (NumPy/SciPy only).

``simulate_4dstem`` builds counts ``I[Rr, Rc, kr, kc]`` of a weak-phase crystal
(SrTiO3-like [001] projection: a square lattice of Gaussian columns) under the
conventions of SPEC §2, and returns them as a :class:`~livessb.Dataset4D`
together with a :class:`SimulationTruth` holding every parameter the forward
model used.

Conventions (the fitting code relies on them):

* NumPy FFT conventions (forward ``exp(-2πi k·r)``). The probe at scan position
  ``R = (i·dr, j·dc)`` is ``p(r - R)``, spectrum ``P(k) exp(-2πi k·R)``,
  ``P(k) = A(k) exp(-iχ(k))`` with χ from :func:`livessb.physics.optics.chi`
  (Krivanek, φ = atan2(q_col, q_row)) and A the aperture with a soft edge one
  detector pixel wide, ``k_α = α/λ``.
* Object: transmission ``t(r) = exp(iσV(r))``, peak phase ``phase_peak_rad``.
  Exit wave ``ψ = p(r - R) t(r)``; intensity ``|FFT ψ|²`` on an Ns×Ns window of
  real-space pixel dx, so the detector pixel is ``dk = 1/(Ns·dx)`` 1/Å and
  ``detector_sampling_mrad = dk·λ·1e3``. The object lives on a fine grid of
  pixel dx; each position takes the window at an integer offset and applies the
  sub-pixel remainder of R as an exact phase ramp on the probe.
* Thick slab (``depth_A`` = t > 0, tilt τ): multislice over
  ``n = ceil(t / slice_A)`` slices. A slice at depth z ∈ [-t/2, t/2] (z grows
  along the beam) sees defocus ``C10 + z`` and holds the projected structure
  shifted laterally by ``z·τ``; C10 refers to the slab mid-plane. Each slice
  transmits ``exp(i(σ/n)V(r - z_i τ))``; between slices the wave is propagated
  with ``exp(-iπλΔz|k|²)`` (forward by Δz adds +Δz to C10).
* Defocus gradient ``(g_r, g_c)`` Å per scan pixel: position (i, j) uses
  ``C10 + g_r (i - (Nr-1)/2) + g_c (j - (Nc-1)/2)``.
* Detector geometry: the pattern is simulated in the scan frame and resampled
  (bilinear) onto the detector: the detector pixel at offset ``k_det`` from the
  BF centre reads the scan-frame pattern at ``k = R(θ)·T·k_det``
  (R = [[cos, -sin], [sin, cos]] on (row, col) vectors, T swaps row/col when
  ``transpose``). The BF centre sits at a sub-pixel position
  ``(Nk_r//2, Nk_c//2) + detector_center_offset_px``.
* Dose: every pattern is normalised to sum 1; ``counts = Poisson(I·dose)``
  drawn with ``np.random.default_rng(seed)`` in scan order; ``dose=None`` gives
  the noiseless normalised patterns (float32).
"""

from __future__ import annotations

from .demo import DEMO_SETTINGS, demo_dataset
from .detector import _resampling_matrix, _rotation_transpose, _scan_frame_size
from .forward import simulate_4dstem
from .lattice import SRTIO3_BASIS, _lattice_peak
from .truth import SimulationTruth

__all__ = [
           "DEMO_SETTINGS",
           "SRTIO3_BASIS",
           "SimulationTruth",
           "_lattice_peak",
           "_resampling_matrix",
           "_rotation_transpose",
           "_scan_frame_size",
           "demo_dataset",
           "simulate_4dstem",
]

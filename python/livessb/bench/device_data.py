"""Device-side synthetic 4D-STEM data for the CUDA benchmark (CuPy, imported lazily).

``generate_dataset`` builds counts ``I[Rr, Rc, kr, kc]`` directly on the GPU with the
conventions of ``livessb.simulate`` (single slice, weak-phase SrTiO3-like crystal,
NumPy FFT signs, probe ``P(q) = A(q) exp(-iχ(q))``, defocus gradient across the scan),
one probe FFT per position in batches:

* the simulation grid is the detector grid (``ns`` = detector size, pixel
  ``dk = k_α / r_BF``); the scan/detector rotation θ is applied by working in
  detector-frame coordinates ``r' = R(θ)ᵀ r``: scan positions and the object are
  rotated, the probe's χ is evaluated at the scan-frame ``q = R(θ) k_det``;
* each position: probe spectrum × sub-pixel shift ramp × local-defocus factor →
  inverse FFT → × object window → FFT → |·|² → normalised → Poisson(dose) → dtype.

The result is a :class:`DeviceDataset4D`: a ``Dataset4D`` whose counts stay on the
device (``counts.device_array``); host reads of a frame (content hash) copy only
that frame, and the CUDA engine gathers BF pixels on the device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..dataset import SUPPORTED_DTYPES, Dataset4D, DatasetError
from ..params import JOINT
from ..physics import optics
from ..simulate import SRTIO3_BASIS, _lattice_peak
from .workload import ABERRATIONS, DEFOCUS_GRADIENT, ROTATION_DEG, SCAN_STEP_A


class DeviceCounts:
    """A CuPy counts array seen as a read-only, host-indexable array (``Dataset4D`` API)."""

    def __init__(self, array: Any) -> None:
        self.device_array = array
        self.shape = tuple(int(s) for s in array.shape)
        self.dtype = np.dtype(array.dtype)
        self.ndim = array.ndim
        self.nbytes = int(array.nbytes)

    def __getitem__(self, index: Any) -> np.ndarray:
        import cupy as cp

        return cp.asnumpy(self.device_array[index])

    def __len__(self) -> int:
        return self.shape[0]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        import cupy as cp

        out = cp.asnumpy(self.device_array)
        return out if dtype is None else out.astype(dtype)

    def reshape(self, *shape: Any) -> DeviceCounts:
        return DeviceCounts(self.device_array.reshape(*shape))


class DeviceDataset4D(Dataset4D):
    """``Dataset4D`` over device-resident counts (CuPy); same calibration rules."""

    def __init__(
        self, counts: Any, voltage_kV: float | None = None,
        semiangle_mrad: float | None = None,
        scan_step_A: float | tuple[float, float] | None = None,
        detector_sampling_mrad: float | None = None,
    ) -> None:
        import cupy as cp

        arr = counts.device_array if isinstance(counts, DeviceCounts) else cp.asarray(counts)
        if arr.ndim != 4:
            raise DatasetError(f"device counts must be 4D, got {arr.ndim}D {arr.shape}")
        if np.dtype(arr.dtype) not in SUPPORTED_DTYPES:
            raise DatasetError(f"counts dtype {arr.dtype} is not supported: use uint8, uint16, "
                               "uint32 or float32")
        if arr.dtype == cp.float32 and bool((~cp.isfinite(arr)).any() or (arr < 0).any()):
            raise DatasetError("counts contain NaN, inf or negative values")
        self.counts = DeviceCounts(arr)  # type: ignore[assignment]
        self._calibrate(voltage_kV, semiangle_mrad, scan_step_A, detector_sampling_mrad,
                        lambda: _device_mean_pattern(arr))


def _device_mean_pattern(arr: Any) -> np.ndarray:
    """Mean pattern on the device, float64, fixed-order (CuPy reduction), to the host."""
    import cupy as cp

    acc = cp.zeros(arr.shape[2:], dtype=cp.float64)
    for r in range(arr.shape[0]):
        acc += arr[r].sum(axis=0, dtype=cp.float64)
    return np.asarray(cp.asnumpy(acc) / (arr.shape[0] * arr.shape[1]))


@dataclass
class DeviceTruth:
    params: dict[str, float]
    rotation_deg: float
    defocus_gradient: tuple[float, float]
    scan_shape: tuple[int, int]
    detector_shape: tuple[int, int]
    scan_step_A: tuple[float, float]
    bf_radius_px: float
    dose: float
    seed: int
    generate_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def local_C10(self, bounds: tuple[int, int, int, int]) -> float:
        r = 0.5 * (bounds[0] + bounds[1] - 1) - 0.5 * (self.scan_shape[0] - 1)
        c = 0.5 * (bounds[2] + bounds[3] - 1) - 0.5 * (self.scan_shape[1] - 1)
        g = self.defocus_gradient
        return self.params["C10"] + g[0] * r + g[1] * c

    def to_dict(self) -> dict[str, Any]:
        return {"params": self.params, "rotation_deg": self.rotation_deg,
                "defocus_gradient": list(self.defocus_gradient),
                "scan_shape": list(self.scan_shape), "detector_shape": list(self.detector_shape),
                "scan_step_A": list(self.scan_step_A), "bf_radius_px": self.bf_radius_px,
                "dose": self.dose, "seed": self.seed, "generate_s": self.generate_s, **self.extra}


_APPLY_WINDOW = r"""
extern "C" __global__ void apply_window(float2* psi, const float2* obj, const long long* n0r,
                                        const long long* n0c, int n, int ns, long long ocols) {
    const long long total = (long long)n * ns * ns;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const int c = (int)(i % ns);
        const int r = (int)((i / ns) % ns);
        const long long p = i / ((long long)ns * ns);
        const float2 t = obj[(n0r[p] + r) * ocols + (n0c[p] + c)];
        const float2 a = psi[i];
        psi[i] = make_float2(a.x * t.x - a.y * t.y, a.x * t.y + a.y * t.x);
    }
}
"""


def _lattice_potential(cp: Any, r_row: Any, r_col: Any, lattice: float, sigma: float,
                       origin: tuple[float, float], basis: Any) -> Any:
    """Periodic Gaussian columns at arbitrary (row, col) points (Å), on the device."""
    out = cp.zeros(r_row.shape, dtype=cp.float32)
    for fr, fc, wgt in basis:
        dr = cp.mod(r_row - origin[0] - fr * lattice + lattice / 2, lattice) - lattice / 2
        dc = cp.mod(r_col - origin[1] - fc * lattice + lattice / 2, lattice) - lattice / 2
        out += np.float32(wgt) * cp.exp(-(dr * dr + dc * dc) / np.float32(2 * sigma**2))
    return out


def generate_dataset(
    scan: tuple[int, int] = (512, 512),
    detector: tuple[int, int] = (192, 192),
    dtype: str | Any = "uint16",
    seed: int = 42,
    scan_step_A: float = SCAN_STEP_A,
    voltage_kV: float = 200.0,
    semiangle_mrad: float = 20.0,
    bf_pixels: int = 8807,
    aberrations: dict[str, float] | None = None,
    defocus_gradient: tuple[float, float] = DEFOCUS_GRADIENT,
    rotation_deg: float = ROTATION_DEG,
    dose: float | None = None,
    phase_peak_rad: float = 0.3,
    batch: int = 4096,
) -> tuple[DeviceDataset4D, DeviceTruth]:
    """Synthetic counts generated on the GPU; see the module docstring."""
    import time

    import cupy as cp

    t0 = time.perf_counter()
    dt = np.dtype(dtype)
    nr, nc = (int(s) for s in scan)
    nkr, nkc = (int(s) for s in detector)
    if nkr != nkc:
        raise ValueError("the device simulator needs a square detector")
    ns = nkr
    coeffs = dict(aberrations or ABERRATIONS)
    lam = optics.wavelength_A(voltage_kV)
    k_alpha = semiangle_mrad * 1e-3 / lam
    r_bf = min(math.sqrt(bf_pixels / math.pi), 0.45 * ns)
    dk = k_alpha / r_bf
    dx = 1.0 / (ns * dk)
    if dose is None:  # ~200 counts per BF pixel in uint16, fewer for uint8
        per_px = 40.0 if dt == np.uint8 else 200.0
        dose = per_px * math.pi * r_bf**2
    theta = math.radians(rotation_deg)
    rot = np.array([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]])

    # Detector grid frequencies (fft order) and the scan-frame q = R k_det for χ.
    k1 = np.fft.fftfreq(ns, dx)
    kdr, kdc = np.meshgrid(k1, k1, indexing="ij")
    qr = rot[0, 0] * kdr + rot[0, 1] * kdc
    qc = rot[1, 0] * kdr + rot[1, 1] * kdc
    p0 = optics.probe_spectrum(qr, qc, lam, k_alpha, dk, coeffs).astype(np.complex64)
    k2 = (kdr**2 + kdc**2).astype(np.float32)
    p0_d, k2_d = cp.asarray(p0), cp.asarray(k2)
    k1_d = cp.asarray(k1.astype(np.float32))

    # Positions in the detector frame r' = Rᵀ r (Å), shifted to start at 0.
    ii, jj = np.meshgrid(np.arange(nr), np.arange(nc), indexing="ij")
    pos = np.stack([(ii * scan_step_A).ravel(), (jj * scan_step_A).ravel()], axis=1)
    posd = pos @ rot  # rows: Rᵀ·R_scan
    pmin = posd.min(axis=0)
    rel = posd - pmin
    n0 = np.floor(rel / dx).astype(np.int64)
    frac = rel / dx - n0
    h = ns // 2
    orows = int(n0[:, 0].max()) + ns + 1
    ocols = int(n0[:, 1].max()) + ns + 1
    # Object grid pixel (u, v) ↔ detector-frame point ((u - h)dx, (v - h)dx) + pmin.
    ur = (cp.arange(orows, dtype=cp.float64) - h) * dx + pmin[0]
    uc = (cp.arange(ocols, dtype=cp.float64) - h) * dx + pmin[1]
    UR, UC = cp.meshgrid(ur, uc, indexing="ij")
    sr = rot[0, 0] * UR + rot[0, 1] * UC  # scan-frame r = R r'
    sc = rot[1, 0] * UR + rot[1, 1] * UC
    lattice, sigma = 3.905, 0.35
    pot = _lattice_potential(cp, sr.astype(cp.float32), sc.astype(cp.float32), lattice, sigma,
                             (0.9, 1.3), SRTIO3_BASIS)
    del UR, UC, sr, sc
    peak = _lattice_peak(lattice, sigma, SRTIO3_BASIS)
    obj = cp.exp(1j * (pot * np.float32(phase_peak_rad / peak))).astype(cp.complex64)
    del pot

    gr, gc = defocus_gradient
    dc10 = (gr * (ii - 0.5 * (nr - 1)) + gc * (jj - 0.5 * (nc - 1))).ravel()
    npos = nr * nc
    counts = cp.empty((npos, ns, ns), dtype=dt)
    rs = cp.random.RandomState(seed)
    win = cp.RawKernel(_APPLY_WINDOW, "apply_window")
    ramp = np.float32(-2.0 * math.pi * dx)
    n0r_all, n0c_all = cp.asarray(n0[:, 0]), cp.asarray(n0[:, 1])
    fr_all = cp.asarray((h + frac[:, 0]).astype(np.float32))
    fc_all = cp.asarray((h + frac[:, 1]).astype(np.float32))
    dc10_all = cp.asarray(dc10.astype(np.float32))
    int_max = np.iinfo(dt).max if dt.kind in "ui" else None
    for s0 in range(0, npos, batch):
        s1 = min(npos, s0 + batch)
        n = s1 - s0
        ph_r = ramp * fr_all[s0:s1, None] * k1_d[None, :]  # (n, ns)
        ph_c = ramp * fc_all[s0:s1, None] * k1_d[None, :]
        ph = (ph_r[:, :, None] + ph_c[:, None, :]
              + np.float32(-math.pi * lam) * dc10_all[s0:s1, None, None] * k2_d[None])
        spec = p0_d[None] * cp.exp(1j * ph).astype(cp.complex64)
        del ph, ph_r, ph_c
        psi = cp.fft.ifft2(spec, axes=(-2, -1))
        del spec
        win((1024,), (256,), (psi, obj, n0r_all[s0:s1], n0c_all[s0:s1], np.int32(n),
                              np.int32(ns), np.int64(ocols)))
        wave = cp.fft.fft2(psi, axes=(-2, -1))
        del psi
        inten = cp.fft.fftshift(wave.real**2 + wave.imag**2, axes=(-2, -1))
        del wave
        inten /= inten.sum(axis=(1, 2), keepdims=True)
        if dt == np.float32:
            counts[s0:s1] = (inten * np.float32(dose)).astype(cp.float32)
        else:
            c = rs.poisson(inten.astype(cp.float64) * dose)
            if int_max is not None:
                c = cp.minimum(c, int_max)
            counts[s0:s1] = c.astype(dt)
            del c
        del inten
    counts4 = counts.reshape(nr, nc, ns, ns)
    cp.cuda.Device().synchronize()
    t_gen = time.perf_counter() - t0
    ds = DeviceDataset4D(counts4, voltage_kV=voltage_kV, semiangle_mrad=semiangle_mrad,
                         scan_step_A=scan_step_A, detector_sampling_mrad=dk * lam * 1e3)
    # The six joint parameters; the simulator has no tilt or depth spread (zeros).
    params = {name: float(coeffs.get(name, 0.0)) for name in JOINT}
    truth = DeviceTruth(params=params, rotation_deg=rotation_deg,
                        defocus_gradient=(float(gr), float(gc)), scan_shape=(nr, nc),
                        detector_shape=(nkr, nkc), scan_step_A=(scan_step_A, scan_step_A),
                        bf_radius_px=r_bf, dose=float(dose), seed=seed, generate_s=t_gen,
                        extra={"bf_count": int(ds.bright_field.radius_px ** 2 * math.pi),
                               "dtype": str(dt)})
    return ds, truth

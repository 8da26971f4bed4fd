"""Virtual images: what the counts show before any fit (BF, ADF, iCoM, DPC).

One pass over the counts in their own array module (``livessb.xp.module_of``): on the
host a chunk of scan rows at a time, each chunk one matrix product of its frames with
four detector weights (inside the BF disk, outside it, row and column offset from the
disk centre); on a GPU one kernel over every pattern (``engine/cuda/virtual_sums.py``,
the same four sums, no float copy of the counts). The rest (COM, iCoM, DPC) is
array code in the same module on scan-sized arrays, and the four images come to the
host in one transfer (before a fit also the COM field, for the rotation estimate).

* ``virtual-bf``: counts inside the measured BF disk (``Dataset4D.bright_field``);
* ``virtual-adf``: counts outside it (the rest of the detector);
* ``dpc``: magnitude of the centre-of-mass (COM) deflection, mrad;
* ``icom``: the COM field rotated into the scan frame and integrated (Fourier, with a
  mirrored extension so the scan edges do not wrap), rad: for a thin phase object the
  COM is ∇φ/2π averaged over the probe (NumPy FFT convention, SPEC §2), so this is the
  phase blurred by the probe. Before a fit the rotation is the curl-free estimate
  (``physics.geometry.estimate_rotation``), which cannot tell θ from θ+π: the branch
  whose image has positive skewness is kept (atoms bright, the rule the full-field fit
  uses for its phase); after a fit the fitted rotation decides.

A plane is removed from the COM field first: a descan ramp (or a detector offset)
deflects every pattern smoothly with the scan position and would otherwise dominate
DPC and bend iCoM into a paraboloid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .mapped_pages import release_pages
from .physics.geometry import estimate_rotation, rotation_matrix
from .xp import module_of, resident, to_host

if TYPE_CHECKING:
    from .dataset import Dataset4D

__all__ = ["IMAGES", "UNITS", "VIRTUAL_IMAGES", "DetectorSums", "VirtualImages",
           "detector_sums", "dpc_image", "icom_image", "virtual_images"]

VIRTUAL_IMAGES: tuple[str, ...] = ("virtual-bf", "virtual-adf", "icom", "dpc")
IMAGES: tuple[str, ...] = (*VIRTUAL_IMAGES, "phase")  # what the widget's scan view can show
UNITS: dict[str, str] = {"virtual-bf": "counts", "virtual-adf": "counts", "icom": "rad",
                         "dpc": "mrad"}

# Host chunks: their float64 copy (the matrix product's operand) stays small, and a
# memory-mapped file's pages are released behind each.
HOST_CHUNK_BYTES = 16 * 2**20


@dataclass(frozen=True)
class DetectorSums:
    """The pass's result per scan position, float64 in the counts' array module."""

    bf: Any  # (Rr, Rc) counts inside the BF disk
    adf: Any  # (Rr, Rc) counts outside it
    com_px: Any  # (Rr, Rc, 2) COM in detector px from the disk centre (row, col)

    @property
    def total(self) -> Any:
        return self.bf + self.adf


def _weights(detector_shape: tuple[int, int], center: tuple[float, float],
             radius_px: float) -> np.ndarray:
    """(kr·kc, 4) float64: inside the disk, outside it, row and column offset (px). The
    inside test is the device kernel's (kernels/virtual.cu), to the last bit."""
    kr, kc = detector_shape
    dr, dc = np.meshgrid(np.arange(kr) - center[0], np.arange(kc) - center[1], indexing="ij")
    inside = (dr**2 + dc**2 <= float(radius_px) ** 2).ravel()
    return np.stack([inside, ~inside, dr.ravel(), dc.ravel()], axis=1).astype(np.float64)


def _host_sums(counts: Any, center: tuple[float, float], radius_px: float) -> np.ndarray:
    """(Rr, Rc, 4) float64 of host counts (arrays, memory maps, lazily read files), in
    chunks of scan rows whose float64 copy stays within ``HOST_CHUNK_BYTES`` (exact for
    integer counts)."""
    Rr, Rc, kr, kc = (int(s) for s in counts.shape)
    w = _weights((kr, kc), center, radius_px)
    per_row = Rc * kr * kc * (np.dtype(counts.dtype).itemsize + 8)
    step = max(1, HOST_CHUNK_BYTES // per_row)
    out = np.empty((Rr * Rc, 4))
    for r0 in range(0, Rr, step):
        chunk = counts[r0:r0 + step]
        frames = np.asarray(chunk, dtype=np.float64).reshape(-1, kr * kc)
        out[r0 * Rc:r0 * Rc + frames.shape[0]] = frames @ w  # one product per chunk
        release_pages(chunk)  # a memory-mapped file's pages: read, no longer needed
    return out.reshape(Rr, Rc, 4)


def detector_sums(counts: Any, center: tuple[float, float], radius_px: float) -> DetectorSums:
    """BF and ADF counts and the COM of every pattern of ``counts`` (Rr, Rc, kr, kc), in
    the counts' array module (no host round trip)."""
    xp, data = resident(counts)
    if xp is np:
        sums = _host_sums(counts, center, radius_px)
    else:
        from .engine.cuda.virtual_sums import device_detector_sums

        sums = device_detector_sums(xp, data, center, radius_px)
    total = sums[..., 0] + sums[..., 1]
    com = sums[..., 2:4] / xp.where(total > 0, total, 1.0)[..., None]
    return DetectorSums(bf=sums[..., 0], adf=sums[..., 1], com_px=com)


def _without_plane(field: Any) -> Any:
    """Each component of a (Rr, Rc, 2) field minus its least-squares plane over the scan.
    On the full centred grid the mean, row and column regressors are orthogonal, so the
    fit is three projections (no solver: nothing for a GPU to set up)."""
    xp = module_of(field)
    Rr, Rc = field.shape[:2]
    r = np.arange(Rr) - 0.5 * (Rr - 1)  # host: the grid's sums need no device sync
    c = np.arange(Rc) - 0.5 * (Rc - 1)
    out = field - field.mean(axis=(0, 1))
    if Rr > 1:
        rd = xp.asarray(r)[:, None, None]
        out = out - rd * ((out * rd).sum(axis=(0, 1)) / (Rc * float(r @ r)))
    if Rc > 1:
        cd = xp.asarray(c)[None, :, None]
        out = out - cd * ((out * cd).sum(axis=(0, 1)) / (Rr * float(c @ c)))
    return out


def dpc_image(com_px: Any, mrad_per_px: float) -> Any:
    """|COM| (plane removed) in mrad: (Rr, Rc), in the COM's array module."""
    xp = module_of(com_px)
    com = _without_plane(com_px)
    return xp.hypot(com[..., 0], com[..., 1]) * float(mrad_per_px)


def icom_image(com_px: Any, pixel_inv_A: float, scan_step_A: tuple[float, float],
               theta: float, transpose: bool) -> Any:
    """The integrated COM (rad) at scan/detector rotation ``theta`` (rad), ``transpose``,
    in the COM's array module.

    The scan-frame deflection k = R(θ)·T·k_det (1/Å) is ∇φ/2π: φ is its least-squares
    integral, Φ(q) = (q · 2πK(q)) / (2πi |q|²), over the scan mirrored into a 2Rr × 2Rc
    periodic field (the gradient's normal component flips sign in each mirror), cropped.
    """
    xp = module_of(com_px)
    k = com_px[..., ::-1] if transpose else com_px
    k = _without_plane(k @ xp.asarray(rotation_matrix(theta).T)) * float(pixel_inv_A)
    gr, gc = 2 * math.pi * k[..., 0], 2 * math.pi * k[..., 1]
    ext_r = xp.concatenate([xp.concatenate([gr, gr[:, ::-1]], axis=1),
                            xp.concatenate([-gr[::-1], -gr[::-1, ::-1]], axis=1)], axis=0)
    ext_c = xp.concatenate([xp.concatenate([gc, -gc[:, ::-1]], axis=1),
                            xp.concatenate([gc[::-1], -gc[::-1, ::-1]], axis=1)], axis=0)
    n, m = ext_r.shape
    qr = xp.fft.fftfreq(n, scan_step_A[0])[:, None]
    qc = xp.fft.fftfreq(m, scan_step_A[1])[None, :]
    q2 = qr**2 + qc**2
    q2[0, 0] = 1.0  # the mean is undetermined: set to 0 below
    spec = (qr * xp.fft.fft2(ext_r) + qc * xp.fft.fft2(ext_c)) / (2j * math.pi * q2)
    spec[0, 0] = 0.0
    Rr, Rc = com_px.shape[:2]
    return xp.fft.ifft2(spec).real[:Rr, :Rc]


def _skewness(x: np.ndarray) -> float:
    d = x - x.mean()
    var = float((d * d).mean())
    return float((d**3).mean()) / var**1.5 if var > 0 else 0.0


@dataclass(frozen=True)
class VirtualImages:
    """The four virtual images (host float64, scan shape) and the rotation iCoM used."""

    images: dict[str, np.ndarray]  # name in VIRTUAL_IMAGES -> (Rr, Rc)
    rotation_deg: float
    transpose: bool
    rotation_source: str  # "fit" (given) or "curl" (estimated, branch by skewness)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.images[name]


def virtual_images(dataset: Dataset4D, rotation_deg: float | None = None,
                   transpose: bool | None = None, sums: DetectorSums | None = None
                   ) -> VirtualImages:
    """All four virtual images of ``dataset`` (``sums``: a pass already made, reused).

    ``rotation_deg``/``transpose`` (a fit's) orient iCoM; without them the curl-free
    estimate does, its branch chosen by positive skewness.
    """
    bf = dataset.bright_field
    if sums is None:
        sums = detector_sums(dataset.counts, (bf.center_row, bf.center_col), bf.radius_px)
    xp = module_of(sums.com_px)
    mrad = float(dataset.detector_sampling_mrad)
    pixel_inv_A = mrad * 1e-3 / float(dataset.wavelength_A)
    step = (float(dataset.scan_step_A[0]), float(dataset.scan_step_A[1]))
    if rotation_deg is not None:
        source, theta, tr = "fit", math.radians(float(rotation_deg)), bool(transpose)
    else:
        est = estimate_rotation(to_host(sums.com_px, site="virtual.com"), step)
        source, theta, tr = "curl", est.theta, est.transpose
    icom = icom_image(sums.com_px, pixel_inv_A, step, theta, tr)
    stack = xp.stack([sums.bf, sums.adf, icom, dpc_image(sums.com_px, mrad)])
    host = to_host(stack, site="virtual.images", dtype=np.float64)  # the one download
    images = dict(zip(VIRTUAL_IMAGES, host, strict=True))
    if source == "curl" and _skewness(images["icom"]) < 0:
        theta, images["icom"] = theta + math.pi, -images["icom"]  # θ+π: the opposite sign
    return VirtualImages(images=images, rotation_deg=math.degrees(theta) % 360.0,
                         transpose=tr, rotation_source=source)

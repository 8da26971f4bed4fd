"""Memory preflight: estimate what a session and a reconstruction will allocate and
refuse, before allocating, when it does not fit in what is free.

Without it a too-large dataset (or a unit typo that blows up the grid) ends in an OOM
kill with no message, or in numpy's raw "Unable to allocate". The estimates are the
engines' large arrays (BF counts, spectra G_b(ν), trotter geometry, the upsampled
grid), per (BF pixel, frequency) pair and per frequency, measured on the engines
(tests/test_memory.py checks the CPU estimate against the measured peak). A memory-mapped
input is not counted: its pages are the page cache's, released behind each pass.
"""

from __future__ import annotations

import resource
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .engine.cpu import PAIR_CACHE_BYTES, pack_bytes
from .physics.geometry import bright_field_pixels, fft_friendly_size

if TYPE_CHECKING:
    from .dataset import Dataset4D

GiB = float(2**30)
# CPU (float64). Per (BF pixel, half-plane frequency) pair the spectra G, 16 B, and, for a
# small scan, its kept trotter pairs (engine.cpu.pack_bytes, PAIR_CACHE_BYTES in all); a
# large scan's kernels find the pairs per call and the reference's dense geometry is
# built a BF chunk at a time (kept only when small). Per half-plane frequency: the
# derivative sums (28 per lobe, complex and real) and their objective's temporaries.
CPU_BYTES_PER_PAIR = 16
CPU_BYTES_PER_FREQUENCY = 4096
# Numba kernels, the search's and the reference's per-chunk working set, the scoring sums
# of one candidate block (engine.cpu.SUMS_BYTES) and the cached dense grids of a small
# scan (engine.reference.GRID_CACHE_BYTES, two rotations). A first run with a cold kernel
# cache compiles them, and LLVM's peak then adds ~150-190 MiB to a warm run (measured on a
# 64² scan once the misfit errors came from the kernels' own sums instead of a pair
# enumeration of their own: cold 288-324 vs warm 143 MiB, was 415 vs 272); the estimate
# covers the cold run with ~15 % to spare.
CPU_FIXED = 272 * 2**20
CPU_FINE_BYTES_PER_FREQUENCY = 160  # the fine half plane, its alias map and sums, O(ν)
# CUDA (float32): G 8 plus the reusable scoring buffers; the fine grid keeps masks.
# (alias_pixels="excluded" adds its exclusion tables, a bit per pair for each of up to 3
# rotations, engine/cuda/prepare.py: 0.375 of the 16, inside HEADROOM.)
CUDA_BYTES_PER_PAIR = 16
CUDA_FINE_BYTES_PER_PAIR = 2
IMAGE_BYTES_PER_PIXEL = 48  # the object spectrum, the image (complex128) and its copy
HEADROOM = 1.10  # allocator slack and small arrays, on what is estimated


class InsufficientMemoryError(MemoryError):
    """The estimated allocation does not fit in the free memory; nothing was allocated."""

    def __init__(self, message: str, need_bytes: int, free_bytes: int, where: str) -> None:
        super().__init__(message)
        self.need_bytes, self.free_bytes, self.where = need_bytes, free_bytes, where


@dataclass
class Estimate:
    where: str  # "host" or "cuda"
    parts: dict[str, int] = field(default_factory=dict)
    exact: tuple[str, ...] = ()  # parts whose size is known to the byte: no headroom

    @property
    def total(self) -> int:
        exact = sum(v for k, v in self.parts.items() if k in self.exact)
        return int(exact + (sum(self.parts.values()) - exact) * HEADROOM)

    def describe(self) -> str:
        return ", ".join(f"{k} {v / GiB:.2f} GiB" for k, v in self.parts.items() if v > 0)


# -- what is free ------------------------------------------------------------------------

def _meminfo_available() -> int | None:
    try:
        import psutil  # optional: the same figure where /proc is missing

        return int(psutil.virtual_memory().available)
    except ImportError:
        pass
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _cgroup_available() -> int | None:
    try:
        with open("/sys/fs/cgroup/memory.max") as fh:
            limit = fh.read().strip()
        if limit == "max":
            return None
        with open("/sys/fs/cgroup/memory.current") as fh:
            return max(0, int(limit) - int(fh.read().strip()))
    except (OSError, ValueError):
        return None


def _address_space_available() -> int | None:
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return max(0, soft - int(line.split()[1]) * 1024)
    except OSError:
        return None
    return soft


def host_free_bytes() -> tuple[int | None, str]:
    """Free host memory: the least of available RAM, the cgroup's and the address-space
    limit's room; and which of them it is."""
    sources = {"available RAM": _meminfo_available(), "the cgroup memory limit":
               _cgroup_available(), "the address-space limit (ulimit -v)":
               _address_space_available()}
    known = {k: v for k, v in sources.items() if v is not None}
    if not known:
        return None, "unknown"
    name = min(known, key=lambda k: known[k])
    return known[name], name


def cuda_free_bytes() -> int | None:
    try:
        import cupy

        free, _ = cupy.cuda.runtime.memGetInfo()
        return int(free) + int(cupy.get_default_memory_pool().free_bytes())
    except Exception:  # no CuPy or no GPU: nothing to check against
        return None


# -- estimates -----------------------------------------------------------------------------

def _pairs(dataset: Dataset4D, upsample: int = 1) -> tuple[int, int, int]:
    """(BF pixels, half-plane frequencies on the f-times grid, scan pixels on it)."""
    bf = dataset.bright_field
    n_bf = bright_field_pixels(dataset.detector_shape, (bf.center_row, bf.center_col),
                               dataset.detector_pixel_inv_A, dataset.k_alpha).count
    Nr, Nc = (fft_friendly_size(n) for n in dataset.scan_shape)
    f = int(upsample)
    return n_bf, f * Nr * (f * Nc // 2 + 1), f * f * Nr * Nc


def uses_cuda(device: str) -> bool:
    if device == "cuda":
        return True
    if device != "auto":
        return False
    from .engine import cuda_available

    return cuda_available()


def session_estimates(dataset: Dataset4D, device: str, staging_budget_MiB: float = 256,
                      corrected: bool = False, spectra_sets: int = 1) -> list[Estimate]:
    """What a Session and its full-field fit allocate: BF counts (float32 when
    ``corrected``: the preprocessing's repaired, shifted or scaled counts), spectra
    (``spectra_sets`` of the full field: 2 when the fit's are apodised), geometry."""
    n_bf, M, _ = _pairs(dataset)
    rows, cols = dataset.scan_shape
    itemsize = max(4, dataset.counts.dtype.itemsize) if corrected else dataset.counts.dtype.itemsize
    counts = rows * cols * n_bf * itemsize
    Nr, Nc = (fft_friendly_size(n) for n in dataset.scan_shape)
    # The FFT staging block (and its spectrum) holds at most the budget, at most all pixels.
    staging = min(int(staging_budget_MiB * 2**20), n_bf * Nr * Nc * 16)
    if uses_cuda(device):
        return [Estimate("cuda", {"BF counts": counts, "spectra and buffers":
                                  (CUDA_BYTES_PER_PAIR + 8 * (spectra_sets - 1)) * n_bf * M,
                                  "staging": staging}),
                Estimate("host", {"BF counts (staged)": counts})]
    return [Estimate("host", {"BF counts": counts,
                              "spectra": spectra_sets * CPU_BYTES_PER_PAIR * n_bf * M,
                              "staging": staging, "sums and kernels": CPU_FIXED
                              + CPU_BYTES_PER_FREQUENCY * M, "kept pairs": _kept_pairs(n_bf, M)},
                     exact=("BF counts", "spectra"))]


def _kept_pairs(n_bf: int, M: int) -> int:
    """What the CPU engine keeps of one grid's trotter pairs: its bound (every pixel of
    every frequency inside) when that fits its cache (engine.cpu.PAIR_CACHE_BYTES), as the
    engine decides; else nothing (the kernels find them per call)."""
    need = pack_bytes(n_bf, M)
    return need if need <= PAIR_CACHE_BYTES else 0


def reconstruct_estimate(dataset: Dataset4D, device: str, upsample: int,
                         images: int = 1) -> Estimate:
    """What a reconstruction at ``upsample`` adds (its geometry is kept per factor), with
    ``images`` of them held at once (a map's batch of tiles and its blend)."""
    n_bf, M_f, pixels = _pairs(dataset, upsample)
    image = IMAGE_BYTES_PER_PIXEL * pixels * images
    if uses_cuda(device):
        geometry = 0 if upsample == 1 else CUDA_FINE_BYTES_PER_PAIR * n_bf * M_f  # 1: reused
        return Estimate("cuda", {"upsampled geometry": geometry, "image": image})
    kept = 0 if upsample == 1 else _kept_pairs(n_bf, M_f)  # 1: the scoring grid's pairs
    return Estimate("host", {"upsampled half plane": CPU_FINE_BYTES_PER_FREQUENCY * M_f,
                             "kept pairs": kept, "image": image})


# -- the checks -----------------------------------------------------------------------

def _options(dataset: Dataset4D, where: str, what: str, corrected: bool) -> str:
    rows, cols = dataset.scan_shape
    half = (rows // 4, rows // 4 + rows // 2, cols // 4, cols // 4 + cols // 2)
    opts = ["bin the detector (livessb.load(..., bin_detector=2): about 4x fewer BF pixels)",
            "crop the detector to the BF disk (livessb.load(..., crop_to_bf=True))",
            f"load part of the scan (livessb.load(..., scan_region={half}))"]
    if what == "reconstruction":
        opts.insert(0, "reconstruct with a smaller upsample (upsample=1 or 2)")
    elif corrected:
        opts.insert(0, "the corrections (bad pixels, descan, dose) hold the BF counts as "
                    "float32; preprocessing=livessb.Preprocessing(descan=None, "
                    "find_bad_pixels=False) keeps the file's dtype")
    opts.append("use another device (device='cpu')" if where == "cuda"
                else "use another device (device='cuda' on a GPU machine)")
    return "; ".join(opts)


def check_fits(estimate: Estimate, dataset: Dataset4D, what: str,
               corrected: bool = False, reusable_bytes: int = 0) -> None:
    """Raise InsufficientMemoryError when ``estimate`` exceeds what is free there, counting
    ``reusable_bytes`` (held by the session the dataset replaces) as free."""
    if estimate.where == "cuda":
        free, source = cuda_free_bytes(), "free GPU memory"
    else:
        free, source = host_free_bytes()
    if free is not None:
        free += reusable_bytes
    need = estimate.total
    if free is None or need <= free:
        return
    place = "on the GPU" if estimate.where == "cuda" else "on the host"
    raise InsufficientMemoryError(
        f"not enough memory for the {what} of {dataset.counts.shape} {dataset.counts.dtype}: "
        f"it needs about {need / GiB:.2f} GiB {place} ({estimate.describe()}) and "
        f"{free / GiB:.2f} GiB is free ({source}). Options: "
        f"{_options(dataset, estimate.where, what, corrected)}", need, free, estimate.where)


def check_session_memory(dataset: Dataset4D, device: str = "auto",
                         staging_budget_MiB: float = 256, corrected: bool = False,
                         reusable_bytes: int = 0, spectra_sets: int = 1) -> None:
    """Preflight for Session.__init__ (and the full-field fit it prepares for), or for
    Session.load_scan with the replaced scan's ``reusable_bytes``."""
    for estimate in session_estimates(dataset, device, staging_budget_MiB, corrected,
                                      spectra_sets):
        check_fits(estimate, dataset, "session", corrected, reusable_bytes)


class CorrectedCountsCheck:
    """The session preflight again, at float32 BF counts, once corrections turn out to be
    on: before the corrections' pass when bad pixels or dose normalisation say so, after
    it when only the descan measurement does (Session.__init__ calls it both times)."""

    def __init__(self, dataset: Dataset4D, device: str, staging_budget_MiB: float,
                 reusable_bytes: int = 0, spectra_sets: int = 1) -> None:
        self.dataset, self.device, self.budget_MiB = dataset, device, staging_budget_MiB
        self.reusable_bytes, self.spectra_sets = reusable_bytes, spectra_sets
        self.done = False

    def __call__(self, corrected: bool) -> None:
        if corrected and not self.done:
            check_session_memory(self.dataset, self.device, self.budget_MiB, corrected=True,
                                 reusable_bytes=self.reusable_bytes,
                                 spectra_sets=self.spectra_sets)
            self.done = True


_checked: weakref.WeakKeyDictionary[Any, set[tuple[int, int]]] = weakref.WeakKeyDictionary()


def check_reconstruct_memory(session: Any, upsample: int, images: int = 1) -> None:
    """Preflight for Session.reconstruct; once per factor and image count (its geometry
    then stays)."""
    done = _checked.setdefault(session, set())
    if (upsample, images) in done:
        return
    check_fits(reconstruct_estimate(session.dataset, session.device, upsample, images),
               session.dataset, "reconstruction")
    done.add((upsample, images))

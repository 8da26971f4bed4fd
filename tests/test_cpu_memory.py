"""CPU memory (issue 16 item 3): a session prepared from a memory-mapped ``.npy`` holds the
BF counts and the spectra, not the file, and nothing that grows with (BF pixels ×
frequencies) beside the spectra.

A fresh process warms up on a small file (imports, Numba kernels), resets its RSS
high-water mark, then loads a 210 MB file whose BF disk is small (the BF counts are
1/100 of it), opens a CPU session, and twice scores a candidate and reconstructs at
Auto upsampling (the second time the engine keeps the trotter pairs of this small scan,
21 B per pair, within ``engine.cpu.PAIR_CACHE_BYTES``: counted). Before this item the
load mapped the whole file into the resident set (its checks and mean pattern read
every page), and packed trotter pairs (~64 B per pair, however large the scan) and the
dense geometry (17 B per BF pixel and frequency) came on top.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from livessb.engine.cpu import PAIR_CACHE_BYTES

MiB = 2**20
STAGING_MiB = 16  # the session's FFT staging budget in the child
# Beyond the counts, the spectra and the staging: the reference's per-chunk temporaries
# (2^18 pairs × ~100 B while the rotation's energy is summed), the kernels' sums and the
# fine half plane (a few MB here), the load's per-row checks, and allocator slack.
MARGIN = 32 * MiB

CHILD = r"""
import ctypes, json, sys
import numpy as np
import livessb

def status(key):
    with open("/proc/self/status") as fh:
        return int(fh.read().split(key + ":")[1].split()[0]) * 1024

def run(path):
    ds = livessb.load(path, voltage_kV=200, semiangle_mrad=20, scan_step_A=0.4,
                      progress=False)
    s = livessb.Session(ds, device="cpu", staging_budget_MiB=int(sys.argv[3]))
    s.rotation_deg, s.transpose = 12.0, False
    for c10 in (-50.0, -40.0):  # twice, as a preview does: the second keeps the pairs
        s.loss_evaluator()(np.array([[c10, 0, 0, 0, 0, 0]]))
        image = s.reconstruct({"C10": c10})
    engine = s._engine
    info = engine.spectra_info(engine.live_spectra()[0])
    sizes = {"bf_counts": int(engine.resident_bf_counts().nbytes),
             "spectra": info["spectra_bytes"], "n_bf": info["n_bf"],
             "upsample": image.upsample, "kept_pairs": engine._pack_bytes()}
    return s, sizes

warm, _ = run(sys.argv[1])  # imports, kernels, first-use caches
warm.close()
del warm
ctypes.CDLL(None).malloc_trim(0)  # freed heap back to the system: growth shows anew
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # the high-water mark (VmHWM) from here
base = status("VmRSS")
s, sizes = run(sys.argv[2])
sizes.update(growth=status("VmHWM") - base)
print(json.dumps(sizes))
"""


def write_scan(path: Path, scan: int, det: int, radius: float) -> int:
    """A uint16 ``.npy`` of a small BF disk with Poisson noise, a scan row at a time."""
    rng = np.random.default_rng(0)
    kr, kc = np.meshgrid(np.arange(det), np.arange(det), indexing="ij")
    c = (det - 1) / 2
    lam = np.where((kr - c) ** 2 + (kc - c) ** 2 <= radius**2, 50.0, 0.2)
    rows = [rng.poisson(lam, size=(scan, det, det)).astype(np.uint16) for _ in range(4)]
    arr = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint16,
                                    shape=(scan, scan, det, det))
    for r in range(scan):
        arr[r] = np.roll(rows[r % 4], r, axis=0)
    arr.flush()
    size = int(arr.nbytes)
    del arr
    return size


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("cpu_memory")
    write_scan(tmp / "warm.npy", 16, 160, 8.0)
    file_bytes = write_scan(tmp / "scan.npy", 64, 160, 8.0)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp / "warm.npy"),
                           str(tmp / "scan.npy"), str(STAGING_MiB)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["file"] = file_bytes
    return out


def test_peak_rss_growth_is_the_counts_and_spectra_plus_a_bounded_margin(
        measured: dict[str, Any]) -> None:
    m = measured
    assert m["n_bf"] > 150 and m["upsample"] == 2, m  # the case is what it claims to be
    assert 0 < m["kept_pairs"] <= PAIR_CACHE_BYTES, m
    bound = m["bf_counts"] + m["spectra"] + m["kept_pairs"] + STAGING_MiB * MiB + MARGIN
    assert m["growth"] <= bound, (
        f"peak RSS grew {m['growth'] / MiB:.0f} MiB; counts {m['bf_counts'] / MiB:.1f} + "
        f"spectra {m['spectra'] / MiB:.1f} + kept pairs {m['kept_pairs'] / MiB:.1f} + staging "
        f"{STAGING_MiB} + margin {MARGIN / MiB:.0f} = {bound / MiB:.0f} MiB", m)


def test_a_memory_mapped_file_is_not_loaded_whole(measured: dict[str, Any]) -> None:
    m = measured
    assert m["file"] > 20 * (m["bf_counts"] + m["spectra"])  # the file dwarfs both
    # Every page of the file is read (checks, mean pattern, descan, BF gather), none stays.
    assert m["growth"] < m["file"] / 2, (
        f"peak RSS grew {m['growth'] / MiB:.0f} MiB for a {m['file'] / MiB:.0f} MiB file", m)

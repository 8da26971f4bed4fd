"""Memory preflight: the estimate covers what the CPU engine really allocates, and a
session or reconstruction that does not fit is refused before allocating."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import livessb
from helpers import with_counts
from livessb import memory
from livessb.preprocess import corrections
from livessb.simulate import simulate_4dstem

if TYPE_CHECKING:
    from livessb import Dataset4D

PROBE = r"""
import json, numpy as np, livessb
from livessb.simulate import simulate_4dstem
from livessb.memory import session_estimates, reconstruct_estimate
ds, _ = simulate_4dstem(scan_shape=(64, 64), detector_shape=(48, 48), dose=2e5, seed=4)
def status(key):
    return int(open('/proc/self/status').read().split(key + ':')[1].split()[0]) * 1024
base = status('VmRSS')
open('/proc/self/clear_refs', 'w').write('5')  # reset the peak (VmHWM)
s = livessb.Session(ds, device='cpu')
s.fit(trials=24, progress=False)
fit_peak = status('VmHWM') - base
import ctypes
ctypes.CDLL(None).malloc_trim(0)  # the fit's freed heap back to the system: RSS grows anew
open('/proc/self/clear_refs', 'w').write('5')
before = status('VmRSS')
rec = s.reconstruct(upsample=8)  # a fine grid large enough to measure
print(json.dumps({"fit_peak": fit_peak, "fit_estimate": session_estimates(ds, 'cpu')[0].total,
                  "rec_peak": status('VmHWM') - before,
                  "rec_estimate": reconstruct_estimate(ds, 'cpu', rec.upsample).total}))
"""


def _probe(cache_dir: str) -> dict[str, int]:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir}
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_cpu_estimates_cover_the_measured_peaks(tmp_path: Path) -> None:
    # A cold kernel cache (a user's first run) compiles every kernel: the highest peak.
    cold = _probe(str(tmp_path))
    assert cold["fit_peak"] <= cold["fit_estimate"], cold
    assert cold["rec_peak"] <= cold["rec_estimate"], cold
    # The estimate is for that worst case and must not refuse what would fit: at most
    # 1.5x the cold peak. (It was bounded by 2.5x the warm peak while a warm fit held
    # ~270 MiB; since the misfit errors use the kernels' own sums a warm fit holds ~145 MiB
    # and the cold run's compilation, ~150-190 MiB of LLVM, is most of the peak.)
    assert cold["fit_estimate"] <= 1.5 * cold["fit_peak"], cold
    # A warm one loads them: the lowest.
    warm = _probe(str(tmp_path))
    assert warm["fit_peak"] < cold["fit_peak"], (warm, cold)
    assert warm["rec_estimate"] <= 2.5 * warm["rec_peak"], warm


@pytest.fixture(scope="module")
def small() -> Dataset4D:
    ds, _ = simulate_4dstem(scan_shape=(24, 24), detector_shape=(32, 32), dose=2e5, seed=4,
                            aberrations={"C10": 40.0})
    return ds


def test_session_refused_when_it_does_not_fit(
        small: Dataset4D, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "host_free_bytes", lambda: (2**20, "available RAM"))
    with pytest.raises(livessb.InsufficientMemoryError) as err:
        livessb.Session(small, device="cpu")
    msg = str(err.value)
    assert isinstance(err.value, MemoryError) and err.value.where == "host"
    assert err.value.need_bytes > err.value.free_bytes == 2**20
    assert "needs about" in msg and "GiB on the host" in msg and "0.00 GiB is free" in msg
    for option in ("bin_detector=2", "crop_to_bf=True", "scan_region=(6, 18, 6, 18)",
                   "device='cuda'"):
        assert option in msg, option


def test_reconstruction_refused_when_it_does_not_fit(
        small: Dataset4D, monkeypatch: pytest.MonkeyPatch) -> None:
    with livessb.Session(small, device="cpu") as s:
        s.fit(trials=8, progress=False)
        est = memory.reconstruct_estimate(small, "cpu", 6).total
        monkeypatch.setattr(memory, "host_free_bytes", lambda: (est // 2, "available RAM"))
        with pytest.raises(livessb.InsufficientMemoryError, match=r"reconstruction .*upsample"):
            s.reconstruct(upsample=6)
        monkeypatch.setattr(memory, "host_free_bytes", lambda: (est * 2, "available RAM"))
        assert s.reconstruct(upsample=6).upsample == 6


def test_free_memory_sources() -> None:
    free, source = memory.host_free_bytes()
    assert free is not None and free > 0
    assert source in ("available RAM", "the cgroup memory limit",
                      "the address-space limit (ulimit -v)")


def test_corrected_counts_are_checked_at_their_float32_size(
        small: livessb.Dataset4D, monkeypatch: pytest.MonkeyPatch) -> None:
    # A hot pixel turns the corrections on: the engine then holds its BF counts as float32,
    # twice the uint16 file's. It is known from the mean pattern, so the session refuses
    # before the corrections' pass over the counts (minutes on a large file).
    counts = np.asarray(small.counts).copy()
    counts[:, :, 3, 5] = 4000
    hot = with_counts(small, counts)
    as_file = memory.session_estimates(hot, "cpu")[0]
    with livessb.Session(hot, device="cpu") as s:
        assert s.preprocessing.active and s.preprocessing.bad_pixels[3, 5]
        as_engine = memory.session_estimates(s.preprocessing.dataset_for_engine(hot), "cpu")[0]
    assert as_engine.parts["BF counts"] == 2 * as_file.parts["BF counts"]
    assert memory.session_estimates(hot, "cpu", corrected=True)[0].total == as_engine.total
    between = (as_file.total + as_engine.total) // 2
    monkeypatch.setattr(memory, "host_free_bytes", lambda: (between, "available RAM"))
    passes: list[int] = []
    measure = corrections._measure

    def counted_measure(*a: Any) -> Any:
        passes.append(1)
        return measure(*a)

    monkeypatch.setattr(corrections, "_measure", counted_measure)
    with pytest.raises(livessb.InsufficientMemoryError, match="float32") as err:
        livessb.Session(hot, device="cpu")
    assert "Preprocessing(descan=None, find_bad_pixels=False)" in str(err.value)
    assert passes == []  # refused before the pass
    # the same memory opens the session when the corrections are off (the file's dtype)
    off = livessb.Preprocessing(descan=None, find_bad_pixels=False)
    with livessb.Session(hot, device="cpu", preprocessing=off) as s:
        assert not s.preprocessing.active


def test_a_descan_found_in_the_pass_is_checked_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # No bad pixel: only the pass can tell that the descan is significant (then corrected).
    ds, _ = simulate_4dstem(scan_shape=(16, 16), detector_shape=(32, 32), dose=2e5, seed=4,
                            descan_px_per_px=(0.1, 0.05, -0.05, 0.1))
    as_file = memory.session_estimates(ds, "cpu")[0].total
    as_engine = memory.session_estimates(ds, "cpu", corrected=True)[0].total
    monkeypatch.setattr(memory, "host_free_bytes",
                        lambda: ((as_file + as_engine) // 2, "available RAM"))
    with pytest.raises(livessb.InsufficientMemoryError, match="float32"):
        livessb.Session(ds, device="cpu")
    with livessb.Session(ds, device="cpu", preprocessing=livessb.Preprocessing(descan=None)) as s:
        assert not s.preprocessing.active
    monkeypatch.setattr(memory, "host_free_bytes", lambda: (2 * as_engine, "available RAM"))
    with livessb.Session(ds, device="cpu") as s:
        assert s.preprocessing.descan_applied and not s.preprocessing.bad_pixels.any()

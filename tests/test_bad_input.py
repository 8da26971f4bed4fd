"""Bad input on the command line, as a new user types it, under a 6 GB address-space
limit: every case ends in a clear message (exit 2, or 0 where --force makes it
work), never a traceback, a MemoryError or an OOM kill."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from livessb.simulate import simulate_4dstem

AS_LIMIT = 6 * 2**30
CAL = ["--voltage-kV", "200", "--semiangle-mrad", "20", "--scan-step-A", "0.6"]


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def livessb(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LIVESSB_DEBUG"}
    return subprocess.run([sys.executable, "-m", "livessb.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout,
                          preexec_fn=_limit_address_space)


def assert_clear(proc: subprocess.CompletedProcess[str], code: int = 2) -> str:
    out = proc.stdout + proc.stderr
    assert proc.returncode == code, out[-3000:]
    for bad in ("Traceback", "MemoryError", "Unable to allocate", "ZeroDivisionError",
                "internal error"):
        assert bad not in out, out[-3000:]
    return proc.stderr


@pytest.fixture(scope="module")
def scan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ds, _ = simulate_4dstem(scan_shape=(16, 16), detector_shape=(32, 32), dose=2e5, seed=4,
                            aberrations={"C10": 40.0})
    path = tmp_path_factory.mktemp("bad") / "scan.npy"
    np.save(path, ds.counts)
    return path


def fit(scan: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return livessb("fit", scan.name, "--device", "cpu", "--trials", "8", *args, cwd=scan.parent)


@pytest.mark.parametrize(("flags", "expect"), [
    # pm typed as Å: the first case (Auto upsampling 192 and an OOM kill before)
    (["--voltage-kV", "200", "--semiangle-mrad", "20", "--scan-step-A", "60"],
     ["--scan-step-A 60", "pm", "0.6 Å", "--force"]),
    # volts typed as kV (Auto upsampling 777 before)
    (["--voltage-kV", "200000", "--semiangle-mrad", "20", "--scan-step-A", "0.6"],
     ["--voltage-kV 200000", "volts", "200 kV", "--force"]),
    # a ZeroDivisionError in the objective before
    (["--voltage-kV", "200", "--semiangle-mrad", "20", "--scan-step-A", "1e6"],
     ["--scan-step-A 1e+06", "outside the plausible scan step range", "--force"]),
    (["--voltage-kV", "200", "--semiangle-mrad", "0.02", "--scan-step-A", "0.6"],
     ["--semiangle-mrad 0.02", "rad", "20 mrad"]),
    (["--voltage-kV", "200", "--semiangle-mrad", "20", "--scan-step-A", "0.6",
      "--detector-sampling-mrad", "2000"], ["--detector-sampling-mrad 2000", "µrad/px"]),
    ([], ["missing --voltage-kV, --semiangle-mrad, --scan-step-A", "--voltage-kV 200"]),
    (["--voltage-kV", "200"], ["missing --semiangle-mrad, --scan-step-A"]),
    ([*CAL, "--scan-step-A", "0.6", "0.6", "0.6"], ["--scan-step-A takes one value"]),
    ([*CAL, "--upsample", "zero"], ["--upsample must be 'auto' or a positive integer"]),
    ([*CAL, "--json", "no/such/folder/fit.json"], ["--json", "does not exist"]),
])
def test_refused_with_a_clear_message(scan: Path, flags: list[str], expect: list[str]) -> None:
    err = assert_clear(fit(scan, *flags))
    for text in expect:
        assert text in err, err
    for keyword in ("voltage_kV", "scan_step_A", "semiangle_mrad", "allow_unusual"):
        assert keyword not in err, err  # the CLI's words, not Python's


def test_bad_region_is_refused_before_the_fit(scan: Path) -> None:
    proc = fit(scan, *CAL, "--region", "0", "40", "0", "8")
    err = assert_clear(proc)
    assert "region (0, 40, 0, 8) lies outside the 16x16 scan" in err
    assert "full field" not in proc.stdout  # no minutes of fitting thrown away


def test_forced_unit_typos_are_capped_and_finish(scan: Path) -> None:
    for flags in (["--voltage-kV", "200", "--semiangle-mrad", "20", "--scan-step-A", "60"],
                  ["--voltage-kV", "200000", "--semiangle-mrad", "20", "--scan-step-A", "0.6"]):
        proc = fit(scan, *flags, "--force")
        err = assert_clear(proc, code=0)
        assert "capped at 8x" in err and "--upsample N" in err, err
        assert "full field: loss" in proc.stdout


def test_forced_absurd_step_has_no_signal(scan: Path) -> None:
    err = assert_clear(fit(scan, "--voltage-kV", "200", "--semiangle-mrad", "20",
                           "--scan-step-A", "1e6", "--force"))
    assert "no single-sideband signal" in err and "scan step" in err


def test_3d_file_without_scan_shape(scan: Path) -> None:
    stack = scan.parent / "stack.npy"
    np.save(stack, np.load(scan).reshape(256, 32, 32))
    err = assert_clear(livessb("fit", stack.name, *CAL, "--device", "cpu", cwd=scan.parent))
    assert "--scan-shape" in err and "scan_shape" not in err, err


def test_too_large_for_memory_is_refused_up_front(tmp_path: Path) -> None:
    """512²×64² counts (a 1 GiB file) with a large BF disk: the CPU engine's spectra alone
    take ~5.5 GiB (16 B per BF pixel and frequency), more than the 6 GB limit leaves:
    refused before allocating, with the size and the options."""
    path = tmp_path / "big.npy"
    counts = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8,
                                       shape=(512, 512, 64, 64))
    kr, kc = np.meshgrid(np.arange(64), np.arange(64), indexing="ij")
    disk = (((kr - 31.5) ** 2 + (kc - 31.5) ** 2) <= 30**2).astype(np.uint8) * 50
    counts[:] = disk
    counts.flush()
    del counts
    err = assert_clear(livessb("fit", path.name, *CAL, "--device", "cpu", cwd=tmp_path))
    assert "not enough memory for the session" in err, err
    assert "GiB on the host" in err and "GiB is free" in err
    assert any(why in err for why in ("address-space limit", "available RAM", "cgroup"))
    for option in ("--bin-detector 2", "--crop-to-bf", "--scan-region", "--device cuda"):
        assert option in err, (option, err)

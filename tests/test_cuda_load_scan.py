"""Session.load_scan on the GPU (skipped without one): the next scan loaded into the
resident session gives the bits a new CUDA Session gives (fit, region, reconstruction),
into the same device counts buffer, with the rotations' geometry rows kept where the
BF pixel set is the same; host and device-resident counts both."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from cuda_helpers import record
from cuda_skip import cp, pytestmark  # noqa: F401  (skips without a GPU)
from livessb import Dataset4D, Session
from livessb.engine.records import DatasetGeometry, same_pixels
from livessb.simulate import simulate_4dstem

TRIALS = 60
REGION = (6, 26, 4, 24)


def scan(k: int) -> Dataset4D:
    ds, _ = simulate_4dstem(
        scan_shape=(32, 32), detector_shape=(32, 32), scan_step_A=0.6, voltage_kV=200,
        semiangle_mrad=20, aberrations={"C10": -45.0 + 3.0 * k, "C12": 8.0, "phi12": 0.4},
        rotation_deg=10.0, dose=1e5, seed=300 + k)
    return ds


def outcome(s: Session) -> dict[str, Any]:
    fit = s.fit(trials=TRIALS, seed=7, progress=False)
    region = s.fit_region(REGION, trials=TRIALS, seed=7)
    return {"params": fit.params, "errors": fit.errors, "loss": fit.loss,
            "trials": fit.trials, "region": region.fit.params,
            "crop": region.crop.phase_hash(), "image": s.reconstruct(fit.params).phase_hash()}


def test_next_scans_on_the_gpu_give_the_bits_of_new_sessions() -> None:
    scans = [scan(k) for k in range(3)]
    kept = []
    with Session(scans[0], device="cuda") as s:
        engine: Any = s._engine
        buffer = engine.resident_bf_counts().data.ptr
        got = [outcome(s)]
        for last, ds in itertools.pairwise(scans):
            rows = dict(engine._geometry)
            s.load_scan(ds)
            assert engine.resident_bf_counts().data.ptr == buffer
            same = same_pixels(DatasetGeometry.of(ds), DatasetGeometry.of(last))
            # the rotations' rows are kept for the same BF pixel set, dropped for another
            assert all((engine._geometry.get(k) is v) == same for k, v in rows.items())
            kept.append(same)
            got.append(outcome(s))
        assert s._engine is engine
    for ds, result in zip(scans, got, strict=True):
        with Session(ds, device="cuda") as new:
            assert outcome(new) == result
    record("load_scan", scans=len(scans), same_pixels=kept)


def test_device_resident_counts_load_into_the_same_buffer() -> None:
    from livessb.bench.device_data import generate_dataset

    a, _ = generate_dataset(scan=(48, 48), detector=(64, 64), bf_pixels=900, seed=1)
    b, _ = generate_dataset(scan=(48, 48), detector=(64, 64), bf_pixels=900, seed=2)
    with Session(a, device="cuda") as s:
        buffer = s._engine.resident_bf_counts().data.ptr  # type: ignore[union-attr]
        s.load_scan(b)
        assert s._engine.resident_bf_counts().data.ptr == buffer  # type: ignore[union-attr]
        got = outcome_small(s)
    with Session(b, device="cuda") as new:
        assert outcome_small(new) == got


def outcome_small(s: Session) -> dict[str, Any]:
    fit = s.fit(trials=TRIALS, seed=7, progress=False)
    return {"params": fit.params, "loss": fit.loss,
            "image": s.reconstruct(fit.params).phase_hash()}


@pytest.mark.parametrize("k", [1])
def test_cuda_next_scan_matches_the_cpu(k: int) -> None:
    ds = scan(k)
    with Session(scan(0), device="cuda") as g, Session(scan(0), device="cpu") as c:
        g.load_scan(ds)
        c.load_scan(ds)
        fg = g.fit(trials=TRIALS, seed=7, progress=False)
        fc = c.fit(trials=TRIALS, seed=7, progress=False)
    worst = max(abs(fg.params[n] - fc.params[n]) / max(1.0, abs(fc.params[n]))
                for n in fc.params)
    record("load_scan_cpu_parity", worst_param_rel=worst)
    assert worst < 1e-4


@pytest.mark.parametrize("slab_bytes", [5 * 32 * 32 * 32 * 2 + 7, 64 << 20])
def test_host_counts_gathered_on_the_device_equal_the_cpus(
        slab_bytes: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Host counts go up in slabs of whole patterns and are gathered on the device: the
    same BF counts as the CPU engine's host gather, for slabs that do not divide the scan
    (5 scan rows of 32) and one slab, from an array and from a memory-mapped file."""
    import numpy as np

    from livessb.engine.cpu import CPUEngine
    from livessb.engine.cuda import CUDAEngine, memory

    monkeypatch.setattr(memory, "HOST_SLAB_BYTES", slab_bytes)
    ds = scan(0)
    path = tmp_path / "counts.npy"
    np.save(path, ds.counts)
    mapped = Dataset4D(np.load(path, mmap_mode="r"), voltage_kV=200, semiangle_mrad=20,
                       scan_step_A=0.6)
    for source in (ds, mapped):
        want = CPUEngine(source).resident_bf_counts()  # (Rr, Rc, B)
        engine = CUDAEngine(source)
        got = cp.asnumpy(engine.resident_bf_counts())  # (B, Rr, Rc)
        engine.close()
        np.testing.assert_array_equal(np.moveaxis(got, 0, -1), want)

"""Calibration files: round trip without refitting, refusal of bad files, atomic saves."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
import pytest

import livessb
from livessb.calibration import CalibrationError
from livessb.simulate import simulate_4dstem

if TYPE_CHECKING:
    from livessb import Dataset4D

    # (dataset, saved calibration, fitted values before saving, reconstruction's phase hash)
    Saved = tuple[Dataset4D, Path, dict[str, Any], str]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Saved:
    ds, _ = simulate_4dstem(scan_shape=(24, 24), detector_shape=(32, 32), dose=1e5, seed=9,
                            aberrations={"C10": -30.0, "C12": 5.0, "phi12": 1.0})
    path = tmp_path_factory.mktemp("cal") / "calibration.json"
    with livessb.Session(ds, device="cpu") as s:
        s.fit(trials=40, progress=False)
        s.fit_region((0, 12, 0, 24), trials=30, region_id="top")
        s.save_calibration(path)
        rec_hash = s.reconstruct().phase_hash()
        assert s.full_fit is not None
        snapshot = {"full": s.full_fit.params, "top": s.regions["top"].params,
                    "top_hash": s.regions["top"].crop.phase_hash(), "rot": s.rotation_deg}
    return ds, path, snapshot, rec_hash


def test_restore_needs_no_fit_and_is_identical(saved: Saved) -> None:
    ds, path, snap, rec_hash = saved
    with livessb.Session(ds, device="cpu", calibration=path) as s:
        assert s.full_fit is not None
        assert s.full_fit.params == snap["full"] and s.rotation_deg == snap["rot"]
        assert s.regions["top"].params == snap["top"]
        assert s.regions["top"].crop.phase_hash() == snap["top_hash"]
        assert s.reconstruct().phase_hash() == rec_hash
        assert s.evaluations == 0  # not one objective evaluation: nothing was refitted


def test_a_restore_keeps_the_scan_frequencies_the_file_was_fitted_with(
        saved: Saved, tmp_path: Path) -> None:
    """The default became "effective" on 2026-12-02: a calibration keeps the setting its
    fit was made with (a file from before the key existed: "grid", the default then), so
    its parameters reconstruct as they did; asked for explicitly, the ask wins."""
    ds, path, _, rec_hash = saved
    with livessb.Session(ds, device="cpu") as s:
        assert s.scan_frequencies == "effective"
    doc = json.loads(path.read_text())
    assert doc["full_fit"]["provenance"]["scan_frequencies"] == "effective"
    old = tmp_path / "before-the-key.json"
    del doc["full_fit"]["provenance"]["scan_frequencies"]
    old.write_text(json.dumps(doc))
    grid = tmp_path / "grid.json"
    doc["full_fit"]["provenance"]["scan_frequencies"] = "grid"
    grid.write_text(json.dumps(doc))
    hashes = {}
    for file, want in ((path, "effective"), (old, "grid"), (grid, "grid")):
        with livessb.Session(ds, device="cpu", calibration=file) as s:
            assert s.scan_frequencies == want
            assert s.reconstruct().phase_hash() == rec_hash  # upsampled: the fine grid's ν
            hashes[file] = s.reconstruct(upsample=1).phase_hash()  # the window's own bins
    assert hashes[old] == hashes[grid] != hashes[path]
    with livessb.Session(ds, device="cpu", calibration=old, scan_frequencies="effective") as s:
        assert s.scan_frequencies == "effective"
        assert s.reconstruct(upsample=1).phase_hash() == hashes[path]
    with pytest.raises(ValueError, match="scan_frequencies must be one of"):
        livessb.Session(ds, device="cpu", calibration=path, scan_frequencies="efective")


def test_corrupt_and_foreign_files_are_refused(saved: Saved, tmp_path: Path) -> None:
    ds, path, _, _ = saved
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "livessb.calibration", "schema_vers')
    with pytest.raises(CalibrationError, match="corrupt"):
        livessb.Session(ds, device="cpu", calibration=bad)
    doc = json.loads(path.read_text())
    bad.write_text(json.dumps({**doc, "schema_version": 99}))
    with pytest.raises(CalibrationError, match="schema version"):
        livessb.Session(ds, device="cpu", calibration=bad)
    bad.write_text(json.dumps({"schema": "something.else"}))
    with pytest.raises(CalibrationError, match="not a livessb calibration"):
        livessb.Session(ds, device="cpu", calibration=bad)
    missing = {k: v for k, v in doc.items() if k != "full_fit"}
    bad.write_text(json.dumps(missing))
    with pytest.raises(CalibrationError, match="missing 'full_fit'"):
        livessb.Session(ds, device="cpu", calibration=bad)
    with pytest.raises(CalibrationError, match="does not exist"):
        livessb.Session(ds, device="cpu", calibration=tmp_path / "nope.json")


def test_other_dataset_is_refused_unless_forced(saved: Saved) -> None:
    ds, path, snap, _ = saved
    other = livessb.Dataset4D(np.ascontiguousarray(ds.counts[:, ::-1]), voltage_kV=200,
                              semiangle_mrad=20, scan_step_A=0.6,
                              detector_sampling_mrad=ds.detector_sampling_mrad)
    with pytest.raises(CalibrationError, match="different dataset"):
        livessb.Session(other, device="cpu", calibration=path)
    with livessb.Session(other, device="cpu", calibration=path, force=True) as s:
        assert s.full_fit is not None
        assert s.full_fit.params == snap["full"]


def test_save_is_atomic_and_failed_save_keeps_old_file(
        saved: Saved, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds, path, _, _ = saved
    target = tmp_path / "keep.json"
    target.write_text(path.read_text())
    before = target.read_text()
    with livessb.Session(ds, device="cpu", calibration=path) as s:
        def broken_replace(src: object, dst: object) -> NoReturn:
            raise OSError("disk full")
        monkeypatch.setattr(os, "replace", broken_replace)
        with pytest.raises(OSError, match="disk full"):
            s.save_calibration(target)
        monkeypatch.undo()
    assert target.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["keep.json"]  # no temp file left


def test_a_folder_given_as_the_file_is_refused_before_anything_is_written(
        saved: Saved, tmp_path: Path) -> None:
    ds, path, _, _ = saved
    folder = tmp_path / "out"
    folder.mkdir()
    with livessb.Session(ds, device="cpu", calibration=path) as s, \
            pytest.raises(IsADirectoryError, match="is a folder: give a file path inside it"):
        s.save_calibration(folder)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temp file beside it
    assert list(folder.iterdir()) == []


def test_nothing_to_save_before_a_fit(saved: Saved, tmp_path: Path) -> None:
    ds = saved[0]
    with livessb.Session(ds, device="cpu") as s, pytest.raises(RuntimeError, match="fit"):
        s.save_calibration(tmp_path / "x.json")

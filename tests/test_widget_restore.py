"""A restored widget lists its saved trials (also after "refine from here", whose Newton
record has no search of its own), and the widget's Save follows the folder rule
(atomic.require_folder: no folder is created, the error names it and the fix). CPU, no
browser."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from helpers import importable, require

require(importable("anywidget"), "pip install anywidget")

import livessb  # noqa: E402
from livessb.atomic import MissingFolderError  # noqa: E402
from livessb.simulate import simulate_4dstem  # noqa: E402
from livessb.widget.bundle import _STATIC  # noqa: E402

if TYPE_CHECKING:
    from livessb import Dataset4D, SSBWidget

TRIALS = 24
TIMEOUT = 300

require((_STATIC / "widget.js").is_file(), "front end not built (npm run build)")


@pytest.fixture(scope="module")
def ds() -> Dataset4D:
    data, _ = simulate_4dstem(scan_shape=(24, 24), detector_shape=(32, 32), dose=5e4, seed=7,
                              aberrations={"C10": -40.0, "C12": 10.0, "phi12": 0.3})
    return data


@pytest.fixture(scope="module")
def fitted(ds: Dataset4D) -> Iterator[SSBWidget]:
    w = livessb.SSBWidget(ds, device="cpu", trials=TRIALS, seed=3)
    w.wait(TIMEOUT)
    assert w.status == "done", w.message
    yield w
    w.close()


def _restored(ds: Dataset4D, path: Path) -> dict[str, Any]:
    w = livessb.SSBWidget(ds, device="cpu", calibration=path, fit=False)
    try:
        w.wait(TIMEOUT)
        return {"trials": list(w.trials_full), "status": w.status, "message": w.message,
                "evaluations": w.session.evaluations, "full_fit": dict(w.full_fit)}
    finally:
        w.close()


def test_restored_widget_lists_the_saved_trials(
        fitted: SSBWidget, ds: Dataset4D, tmp_path: Path) -> None:
    listed = list(fitted.trials_full)
    assert len(listed) == TRIALS  # the fit's best trials (all 24 here)
    path = fitted.save_calibration(tmp_path / "cal.json")
    assert len(json.loads(path.read_text())["full_fit"]["trials"]) == TRIALS
    got = _restored(ds, path)
    assert got["status"] == "done" and got["evaluations"] == 0, got["message"]
    assert got["trials"] == listed


def test_trials_survive_refine_save_and_restore(
        fitted: SSBWidget, ds: Dataset4D, tmp_path: Path) -> None:
    listed = list(fitted.trials_full)
    before = dict(fitted.full_fit["params"])
    start = {**before, "C10": before["C10"] + 6.0}
    fitted._on_custom_msg(fitted, {"type": "refine", "params": start, "locked": []}, [])
    fitted.wait(TIMEOUT)
    assert fitted.status == "done", fitted.message
    refined = fitted.session.full_fit
    assert refined is not None and refined.provenance["mode"] == "refine"
    assert refined.trials and refined.provenance["trials_from"] == "full_field"
    assert fitted.trials_full == listed  # the widget kept listing the search's trials
    path = fitted.save_calibration(tmp_path / "refined.json")
    doc = json.loads(path.read_text())
    assert doc["full_fit"]["provenance"]["mode"] == "refine"
    assert len(doc["full_fit"]["trials"]) == TRIALS
    got = _restored(ds, path)
    assert got["trials"] == listed
    assert got["full_fit"]["params"] == pytest.approx(fitted.full_fit["params"], abs=0)


def test_save_into_a_missing_folder_is_refused_and_creates_nothing(
        fitted: SSBWidget, tmp_path: Path) -> None:
    target = tmp_path / "no-such-folder" / "cal.json"
    want = (f"the folder {str(target.parent)!r} does not exist (livessb creates no folders): "
            "create it first or choose another path")
    with pytest.raises(MissingFolderError) as info:
        fitted.save_calibration(target)
    assert want in str(info.value)
    # the Save button's message: the same refusal shown in the widget
    fitted._on_custom_msg(fitted, {"type": "save", "path": str(target)}, [])
    fitted.wait(TIMEOUT)
    assert fitted.status == "error" and want in fitted.message, fitted.message
    assert not target.parent.exists()
    fitted._on_custom_msg(fitted, {"type": "save", "path": str(tmp_path / "cal.json")}, [])
    fitted.wait(TIMEOUT)
    assert fitted.status == "done" and "saved" in fitted.message

"""The widget says why a full field's aberrations are not determined (issue 20,
fit.transpose_choice): the status line carries the reason the CLI prints as "why:"."""

from __future__ import annotations

from helpers import importable, require
from test_transpose_choice import ORIENTATION_NOT_DETERMINED, small_crystal_scan

require(importable("anywidget"), "pip install anywidget")

import livessb  # noqa: E402


def test_the_status_line_says_the_detector_orientation_is_not_determined() -> None:
    w = livessb.SSBWidget(small_crystal_scan(), trials=200)
    try:
        w.wait(120)
        assert w.status == "done", w.message
        assert {"C10", "C12", "phi12"} <= set(w.full_fit["undetermined"])
        assert w.message.startswith(ORIENTATION_NOT_DETERMINED), w.message
        assert "--calibration" in w.message  # what to do next
    finally:
        w.close()

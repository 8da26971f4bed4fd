"""Same bits as the golden record (tests/golden/golden.json), written before the refactor."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "golden"))

from make_golden import RECORD, compute

pytestmark = pytest.mark.slow


def test_cpu_results_reproduce_the_golden_record_bit_for_bit() -> None:
    expected = json.loads(RECORD.read_text())
    got = json.loads(json.dumps(compute(), sort_keys=True))
    for case in expected:
        for key in expected[case]:
            assert got[case][key] == expected[case][key], f"{case}/{key} changed"

"""Same bits as the golden record (tests/golden/), written before the refactor.

Bit for bit against the record of this kind of CPU (``golden-<machine_kind>.json``);
on a CPU with no record of its own, against ``golden.json`` with every number within
1e-9 (relative) and every count, flag and name exact: the digests of trial records and
images depend on the last bits and are compared only where a record of this CPU exists
(the same releases gave losses 1e-14 apart on two CPUs, every digest after them).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent / "golden"))

from make_golden import RECORD, compute, machine_kind, machine_record

pytestmark = pytest.mark.slow

NUMBER_RTOL = 1e-9


def _close(got: Any, expected: Any, where: str) -> None:
    if isinstance(expected, dict):
        assert isinstance(got, dict) and got.keys() == expected.keys(), where
        for key in expected:
            _close(got[key], expected[key], f"{where}/{key}")
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), where
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            _close(g, e, f"{where}[{i}]")
    elif isinstance(expected, float) and not isinstance(expected, bool):
        assert math.isclose(got, expected, rel_tol=NUMBER_RTOL, abs_tol=1e-12), \
            f"{where}: {got!r} != {expected!r}"
    elif isinstance(expected, str) and len(expected) == 64:  # a sha256 digest
        assert isinstance(got, str) and len(got) == 64, where
    else:
        assert got == expected, f"{where}: {got!r} != {expected!r}"


def test_cpu_results_reproduce_the_golden_record_bit_for_bit() -> None:
    got = json.loads(json.dumps(compute(), sort_keys=True))
    own = machine_record()
    if own.exists():
        expected = json.loads(own.read_text())
        for case in expected:
            for key in expected[case]:
                assert got[case][key] == expected[case][key], \
                    f"{case}/{key} changed ({own.name})"
    else:  # a CPU kind with no record: the numbers, not their last bits
        print(f"no golden record for {machine_kind()}: numbers within {NUMBER_RTOL:g} of "
              f"{RECORD.name} (write one with make_golden.py --machine)")
        _close(got, json.loads(RECORD.read_text()), RECORD.name)


def test_the_records_of_two_cpus_agree_in_every_number() -> None:
    """The per-CPU records differ only in the last bits, never in a result."""
    reference = json.loads(RECORD.read_text())
    for path in sorted(RECORD.parent.glob("golden-*.json")):
        _close(json.loads(path.read_text()), reference, path.name)

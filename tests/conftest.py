"""Shared fixtures: simulated datasets with known truth and fits on them (CPU engine)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from livessb import Dataset4D, Session
    from livessb.simulate import SimulationTruth

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def demo_with_truth() -> tuple[Dataset4D, SimulationTruth]:
    import livessb.simulate

    return livessb.simulate.demo_dataset(with_truth=True)


@pytest.fixture(scope="session")
def demo_session(demo_with_truth: tuple[Dataset4D, SimulationTruth]) -> Iterator[Session]:
    """The demo dataset, fitted once (full field, both branches) and shared read-only."""
    import livessb

    ds, _ = demo_with_truth
    s = livessb.Session(ds, device="cpu")
    s.fit(progress=False)
    yield s
    s.close()

"""The counted host transfer into pinned memory (skipped without a GPU): the same values
as ``.get()``, in page-locked memory, one counted transfer; NumPy input passes through."""

from __future__ import annotations

import numpy as np

from cuda_skip import cp, pytestmark  # noqa: F401  (skips without a GPU)
from livessb.xp import counting, to_host


def test_pinned_download_equals_get_in_page_locked_memory() -> None:
    a = (cp.arange(3 * 1536, dtype=cp.float32).reshape(3, 1536) * (1 + 2j)).astype(
        cp.complex64)
    with counting() as count:
        host = to_host(a, "test", pinned=True)
    assert count.transfers == 1
    np.testing.assert_array_equal(host, a.get())
    assert host.dtype == np.complex64 and host.flags.c_contiguous
    assert type(host.base).__name__ == "PinnedMemoryPointer"
    plain = np.ones(4)
    assert to_host(plain, "test", pinned=True) is plain or np.array_equal(
        to_host(plain, "test", pinned=True), plain)

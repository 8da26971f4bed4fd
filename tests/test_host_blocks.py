"""Large downloads land in reused host blocks (livessb.xp.HostBlocks): a block comes back
only when no array over it is left, and the data are the device array's."""

from __future__ import annotations

import gc

import numpy as np

from livessb import xp
from livessb.xp import HostBlocks, to_host


class FakeDeviceArray:
    """What ``to_host`` reads of a CuPy array: get(out=...), nbytes, shape, dtype, flags."""

    def __init__(self, host: np.ndarray) -> None:
        self._host = host
        self.nbytes, self.shape, self.dtype, self.flags = (host.nbytes, host.shape, host.dtype,
                                                           host.flags)
        self.gets: list[bool] = []  # whether each get had an out (holding none)

    def get(self, out: np.ndarray | None = None) -> np.ndarray:
        self.gets.append(out is not None)
        if out is None:
            return self._host.copy()
        out[...] = self._host
        return out


def test_a_block_returns_only_when_its_last_view_is_gone() -> None:
    blocks = HostBlocks()
    a = blocks.array((512, 512), np.complex64)
    a[...] = 1 + 2j
    address = a.ctypes.data
    view = a[100:200, 3:50]
    del a
    gc.collect()
    assert blocks.free_blocks() == 0  # the view still reads the block
    b = blocks.array((512, 512), np.complex64)
    assert b.ctypes.data != address and np.all(view == 1 + 2j)
    del view
    gc.collect()
    assert blocks.free_blocks() == 1
    c = blocks.array((512, 512), np.complex64)  # the same size: the freed block again
    assert c.ctypes.data == address and blocks.free_blocks() == 0
    d = blocks.array((256, 512), np.complex64)  # another size: a new block
    assert d.ctypes.data not in (address, b.ctypes.data)
    del b, c, d
    gc.collect()
    assert blocks.free_blocks() == 3
    kept = [blocks.array((8,), np.float64) for _ in range(HostBlocks.KEEP + 2)]
    del kept
    gc.collect()
    assert blocks.free_blocks() == HostBlocks.KEEP  # the rest are unmapped


def test_large_device_downloads_use_the_blocks_small_ones_do_not() -> None:
    rng = np.random.default_rng(0)
    big = (rng.normal(size=(1024, 1536)) + 1j * rng.normal(size=(1024, 1536))).astype(
        np.complex64)
    assert big.nbytes >= HostBlocks.MIN_BYTES
    dev = FakeDeviceArray(big)
    got = to_host(dev, "test")
    assert dev.gets == [True] and got.flags.c_contiguous and got.flags.writeable
    np.testing.assert_array_equal(got, big)
    small = FakeDeviceArray(np.arange(10.0))
    np.testing.assert_array_equal(to_host(small, "test"), np.arange(10.0))
    assert small.gets == [False]
    before = xp._HOST_BLOCKS.free_blocks()
    del got
    gc.collect()
    assert xp._HOST_BLOCKS.free_blocks() == min(before + 1, HostBlocks.KEEP)

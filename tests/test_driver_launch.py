"""The driver launches' packed parameters against the kernels' C signatures (no GPU).

``engine.cuda.driver_launch`` packs each launch record into one buffer that
``cuLaunchKernel`` copies; its layout must be the C layout of the kernel's parameters
(each at an offset aligned to its size, pointers 8 bytes) or a kernel reads garbage.
"""

from __future__ import annotations

import ctypes
import dataclasses
import struct
import typing
from typing import Any

import numpy as np
import pytest

from livessb.engine.cuda import driver_launch as dl
from livessb.engine.cuda import launch as la
from test_cuda_launch_args import SIGNATURES

C_SIZES = {"int": (4, "i"), "long long": (8, "q"), "float": (4, "f"), "double": (8, "d")}


def _c_offsets(kernel: str) -> list[tuple[int, str]]:
    """(offset, struct code) of each parameter as a C compiler lays them out."""
    out, offset = [], 0
    for ctype, _ in SIGNATURES[kernel]:
        size, code = (8, "Q") if "*" in ctype else C_SIZES[ctype]
        offset += -offset % size
        out.append((offset, code))
        offset += size
    return out


class _DevicePointer:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class _DeviceArray:
    """Stands for a CuPy array: what the packer reads is ``.data.ptr``."""

    def __init__(self, ptr: int) -> None:
        self.data = _DevicePointer(ptr)


def _record_with_distinct_values(record: type[la.KernelArgs]) -> tuple[Any, list[Any]]:
    hints = typing.get_type_hints(record, vars(la))
    values: list[Any] = []
    for i, f in enumerate(dataclasses.fields(record)):
        kind = hints[f.name]
        if kind is Any:  # alternate arrays and NULLs given as np.uint64
            values.append(_DeviceArray(0x7F0000001000 + 0x100 * i) if i % 3 else
                          np.uint64(0x10 * i))
        else:
            values.append(kind(1000 + i + (0.25 if kind in (np.float32, np.float64) else 0)))
    return record(*values), values


@pytest.mark.parametrize("record", la.ARG_RECORDS, ids=lambda r: r.__name__)
def test_packed_parameters_sit_at_the_c_offsets(record: type[la.KernelArgs]) -> None:
    layout = dl.layout_of(record, vars(la))
    args, values = _record_with_distinct_values(record)
    data = dl.pack(layout, args.args())
    offsets = _c_offsets(record.KERNEL)
    last_offset, last_code = offsets[-1]
    assert len(data) == layout.packer.size == last_offset + struct.calcsize(last_code)
    for (offset, code), value in zip(offsets, values, strict=True):
        got = struct.unpack_from("<" + code, data, offset)[0]
        want = value.data.ptr if isinstance(value, _DeviceArray) else value
        if code == "f":
            assert got == np.float32(want)
        else:
            assert got == want, (record.__name__, offset, code)


def test_every_record_fits_the_parameter_buffer() -> None:
    assert max(dl.layout_of(r, vars(la)).packer.size for r in la.ARG_RECORDS) <= 4096


def test_handle_of_reads_a_raw_kernels_loaded_function() -> None:
    class Function:
        ptr = 0xABC

    class RawKernel:  # what RawModule.get_function gives: the Function is its .kernel
        kernel = Function()

    assert dl.handle_of(RawKernel()) == 0xABC == dl.handle_of(Function())
    with pytest.raises(AttributeError):
        dl.handle_of(object())


def test_pointer_of_reads_arrays_and_nulls() -> None:
    assert dl.pointer_of(_DeviceArray(1234)) == 1234
    assert dl.pointer_of(la.NULL_POINTER) == 0


def test_without_the_driver_library_launches_keep_cupys_call(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> Any:
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(dl, "ACTIVE", None)
    monkeypatch.setattr(dl, "INACTIVE_REASON", "")
    monkeypatch.setattr(ctypes, "CDLL", missing)
    dl.activate(object(), vars(la), probe=object())  # (no CUfunction handle either)
    assert dl.ACTIVE is None and dl.INACTIVE_REASON.startswith("AttributeError")
    calls: list[tuple[Any, ...]] = []

    def kernel(grid: Any, block: Any, args: Any, shared_mem: int = 0) -> None:
        calls.append((grid, block, args, shared_mem))

    rec = la.VpEvalFinishArgs(np.zeros(2), np.int32(2), np.int32(3), np.int32(4), np.zeros(1))
    la.launch(kernel, (5,), (128,), rec)
    la.launch(kernel, (5,), (128,), rec, shared_mem=64)
    assert [c[3] for c in calls] == [0, 64] and calls[0][2] == rec.args()

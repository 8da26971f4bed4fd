"""Kernel launches through the CUDA driver with one packed parameter buffer.

CuPy's ``Function.__call__`` converts each argument into a pointer object, ~1.3 µs an
argument (24.5 µs for 15 on the H200's host): a map tile launches ~40 kernels of 10–21
arguments. Each ``launch.KernelArgs`` record's C layout is known from its field types
(checked against the kernels' signatures by tests/test_cuda_launch_args.py), so the
values are packed with one ``struct`` into a buffer that ``cuLaunchKernel`` copies
(``CU_LAUNCH_PARAM_BUFFER_POINTER``): the same kernel, the same arguments, the same bits.
Where the driver library cannot be loaded the launch falls back to CuPy's call.
"""

from __future__ import annotations

import ctypes
import dataclasses
import struct
import threading
import typing
from typing import Any

import numpy as np

# C layout of a record field by its annotation: struct code, size = alignment.
_SCALAR_CODES: dict[Any, str] = {np.int32: "i", np.int64: "q", np.float32: "f",
                                 np.float64: "d"}
_POINTER = "Q"  # device pointers (arrays, or NULL as np.uint64)
_PARAM_BUFFER_POINTER, _PARAM_BUFFER_SIZE, _PARAM_END = 1, 2, 0
_BUFFER_BYTES = 4096  # CUDA's classic limit on a kernel's parameters


@dataclasses.dataclass(frozen=True)
class Layout:
    """A record type's packed parameters: the struct and which fields are pointers."""

    packer: struct.Struct
    pointers: tuple[int, ...]


def layout_of(record: type, namespace: dict[str, Any]) -> Layout:
    """The C parameter layout of a ``KernelArgs`` record type: each field at the next
    offset aligned to its size (pointers 8 bytes), little-endian as the device."""
    hints = typing.get_type_hints(record, namespace)
    fmt, offset, pointers = "<", 0, []
    for i, f in enumerate(dataclasses.fields(record)):
        code = _SCALAR_CODES.get(hints[f.name], _POINTER)
        if code == _POINTER:
            pointers.append(i)
        size = struct.calcsize("<" + code)
        pad = -offset % size
        fmt += "x" * pad + code
        offset += pad + size
    return Layout(struct.Struct(fmt), tuple(pointers))


def pointer_of(value: Any) -> int:
    """A device array's address (a view's own offset included), or a NULL given as int."""
    data = getattr(value, "data", None)
    return int(data.ptr) if data is not None and hasattr(data, "ptr") else int(value)


def handle_of(kernel: Any) -> int:
    """The CUfunction of a compiled kernel: ``RawModule.get_function`` gives a RawKernel,
    whose ``kernel`` is the loaded ``cupy.cuda.Function`` (``ptr``: the handle)."""
    return int(getattr(kernel, "kernel", kernel).ptr)


def pack(layout: Layout, values: tuple[Any, ...]) -> bytes:
    """The parameter bytes of one launch."""
    vals = list(values)
    for i in layout.pointers:
        vals[i] = pointer_of(vals[i])
    return layout.packer.pack(*vals)


class _Buffers(threading.local):
    """Each launching thread's parameter buffer and the ``extra`` array pointing to it
    (the driver copies the parameters during the call, so the buffer is reused)."""

    def __init__(self) -> None:
        self.params = ctypes.create_string_buffer(_BUFFER_BYTES)
        self.size = ctypes.c_size_t(0)
        self.extra = (ctypes.c_void_p * 5)(
            _PARAM_BUFFER_POINTER, ctypes.addressof(self.params), _PARAM_BUFFER_SIZE,
            ctypes.addressof(self.size), _PARAM_END)
        self.extra_address = ctypes.addressof(self.extra)
        self.context_bound = False


class DriverLauncher:
    """``cuLaunchKernel`` on the current CuPy stream, in the context CuPy made current
    where this was built (bound in every other thread before its first launch)."""

    def __init__(self, cp: Any, namespace: dict[str, Any], probe: Any) -> None:
        handle_of(probe)  # a compiled kernel's CUfunction handle (AttributeError: none)
        lib = ctypes.CDLL("libcuda.so.1")
        self._launch = lib.cuLaunchKernel
        self._launch.restype = ctypes.c_int
        self._launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self._error_name = lib.cuGetErrorName
        self._set_context = lib.cuCtxSetCurrent
        self._set_context.argtypes = [ctypes.c_void_p]
        context = ctypes.c_void_p()
        cp.cuda.runtime.free(0)  # (a no-op that makes CuPy's context current here)
        if lib.cuCtxGetCurrent(ctypes.byref(context)) != 0 or not context.value:
            raise RuntimeError("no current CUDA context")
        self._context = context.value
        self._cp = cp
        self._namespace = namespace
        self._layouts: dict[type, Layout] = {}
        self._buffers = _Buffers()
        self._buffers.context_bound = True

    def __call__(self, kernel: Any, grid: tuple[int, ...], block: tuple[int, ...],
                 args: Any, shared_mem: int = 0) -> None:
        kind = type(args)
        layout = self._layouts.get(kind)
        if layout is None:
            layout = self._layouts[kind] = layout_of(kind, self._namespace)
        buf = self._buffers
        if not buf.context_bound:
            self._set_context(self._context)
            buf.context_bound = True
        vals = list(args.args())
        for i in layout.pointers:
            vals[i] = pointer_of(vals[i])
        layout.packer.pack_into(buf.params, 0, *vals)
        buf.size.value = layout.packer.size
        g = (*grid, 1, 1)
        b = (*block, 1, 1)
        rc = self._launch(handle_of(kernel), int(g[0]), int(g[1]), int(g[2]), int(b[0]), int(b[1]),
                          int(b[2]), int(shared_mem), self._cp.cuda.get_current_stream().ptr,
                          None, buf.extra_address)
        if rc != 0:
            name = ctypes.c_char_p()
            self._error_name(rc, ctypes.byref(name))
            raise RuntimeError(f"launching {kind.KERNEL}: CUDA error {rc} "
                               f"({(name.value or b'?').decode()})")


# The process's launcher once a CUDA engine made one (None: CuPy's own call), and why
# there is none where making it failed.
ACTIVE: DriverLauncher | None = None
INACTIVE_REASON = "no CUDA engine made yet"


def activate(cp: Any, namespace: dict[str, Any], probe: Any) -> None:
    """Make the driver launcher once per process (``probe``: a compiled kernel); where
    the driver library or the kernels' handles are not there, launches keep CuPy's call."""
    global ACTIVE, INACTIVE_REASON
    if ACTIVE is None:
        try:
            ACTIVE = DriverLauncher(cp, namespace, probe)
        except (OSError, AttributeError, RuntimeError) as exc:
            ACTIVE, INACTIVE_REASON = None, f"{type(exc).__name__}: {exc}"

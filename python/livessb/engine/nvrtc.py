"""The CUDA kernels compiled without a GPU: NVRTC from the nvidia-cuda-nvrtc wheel (no
driver, no CuPy) turns ``cuda_kernels.source()`` into PTX for the H200's architecture with
every name expression the engine asks for. tests/test_cuda_compile.py checks that both
modules compile (and what they call); benchmarks/kernel_registers.py feeds the PTX to ptxas.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import cuda_kernels as ck

ARCH = "compute_90"  # the H200 and H100 (Hopper)


@dataclass(frozen=True)
class Compiled:
    status: int  # NVRTC's result: 0 compiled
    log: str  # the compiler's messages
    ptx: str  # empty unless compiled
    lowered: dict[str, str]  # each name expression's mangled kernel name (compiled only)


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL:
    import nvidia.cuda_nvrtc as pkg

    lib = next(Path(p) / "lib" for p in pkg.__path__)
    return ctypes.CDLL(str(next(lib.glob("libnvrtc.so*"))))


def compile_kernels(options: Sequence[str] = ()) -> Compiled:
    """The kernels' source compiled with ``options`` (e.g. ``-DALIAS_PIXELS=1``, the alias
    module) after ``-std=c++17`` and the architecture, as the engine's module is."""
    lib = _library()
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), ck.source().encode(), b"livessb.cu",
                                  0, None, None) == 0
    names = ck._names()
    for name in names:
        assert lib.nvrtcAddNameExpression(prog, name.encode()) == 0, name
    opts = [o.encode() for o in ("-std=c++17", f"--gpu-architecture={ARCH}", *options)]
    status = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    ptx, lowered = "", {}
    if status == 0:
        lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetPTX(prog, buf)
        ptx = buf.value.decode()
        for name in names:
            out = ctypes.c_char_p()
            assert lib.nvrtcGetLoweredName(prog, name.encode(), ctypes.byref(out)) == 0, name
            lowered[name] = (out.value or b"").decode()
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return Compiled(int(status), log.value.decode(), ptx, lowered)

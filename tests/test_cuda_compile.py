"""The CUDA kernels compile without a GPU: NVRTC (the nvidia-cuda-nvrtc wheel, no driver)
compiles ``cuda_kernels.source()`` with every name expression the engine asks for, for
the H200's architecture, as the default module and as the alias module
(``-DALIAS_PIXELS=1``, alias_pixels="excluded"). A kernel edit that would not compile
fails here, not on the device. The default module holds no alias test at all; the alias
module calls it from every kernel that walks trotter pairs."""

from __future__ import annotations

import ctypes
import functools
import re
from pathlib import Path

import pytest

from helpers import importable, require

require(importable("nvidia.cuda_nvrtc"), "NVRTC (pip install nvidia-cuda-nvrtc-cu12)")

from livessb.engine import cuda_kernels as ck  # noqa: E402

ARCH = b"--gpu-architecture=compute_90"  # the H200 (Hopper)
PAIR_WALKS = ("vp_eval", "vp_derivs", "energy_kernel", "reconstruct_kernel")


@functools.lru_cache(maxsize=1)
def _nvrtc() -> ctypes.CDLL:
    import nvidia.cuda_nvrtc as pkg

    lib = next(Path(p) / "lib" for p in pkg.__path__)
    return ctypes.CDLL(str(next(lib.glob("libnvrtc.so*"))))


@functools.lru_cache(maxsize=2)
def _compile(alias: bool) -> tuple[int, str, str, dict[str, str]]:
    """(status, log, PTX, lowered name of each name expression)."""
    lib = _nvrtc()
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), ck.source().encode(), b"livessb.cu",
                                  0, None, None) == 0
    names = ck._names()
    for name in names:
        assert lib.nvrtcAddNameExpression(prog, name.encode()) == 0, name
    opts = [b"-std=c++17", ARCH] + ([b"-DALIAS_PIXELS=1"] if alias else [])
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
    return status, log.value.decode(), ptx, lowered


def _entries(ptx: str) -> dict[str, str]:
    """Each kernel's PTX body by its mangled name."""
    parts = re.split(r"\n(?=\.(?:visible|weak) \.entry )", ptx)
    out = {}
    for part in parts[1:]:
        name = re.match(r"\.(?:visible|weak) \.entry (\S+?)\(", part)
        assert name is not None
        out[name.group(1)] = part
    return out


@pytest.mark.parametrize("alias", [False, True], ids=["default", "alias"])
def test_every_kernel_the_engine_names_compiles_for_the_h200(alias: bool) -> None:
    status, log, ptx, lowered = _compile(alias)
    assert status == 0, log[-4000:]
    entries = _entries(ptx)
    assert set(lowered.values()) <= set(entries)
    assert len(lowered) == len(ck._names())


def test_only_the_alias_module_tests_the_aliases_in_every_pair_walk() -> None:
    _, _, default, names = _compile(False)
    _, _, alias, _ = _compile(True)
    assert "alias_shared" not in default
    bodies = _entries(alias)
    for name, mangled in names.items():
        calls = re.search(r"call[.\w]*[^;]*alias_shared", bodies[mangled]) is not None
        assert calls == (name.split("<")[0] in PAIR_WALKS), name

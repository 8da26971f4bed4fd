"""The CUDA kernels compile without a GPU: NVRTC (the nvidia-cuda-nvrtc wheel, no driver)
compiles ``cuda_kernels.source()`` with every name expression the engine asks for, for
the H200's architecture, as the default module and as the alias module
(``-DALIAS_PIXELS=1``, alias_pixels="excluded"). A kernel edit that would not compile
fails here, not on the device. The default module holds no alias test at all; in the alias
module the table kernel makes it and every kernel that walks trotter pairs reads the table."""

from __future__ import annotations

import functools
import re

import pytest

from helpers import importable, require

require(importable("nvidia.cuda_nvrtc"), "NVRTC (pip install nvidia-cuda-nvrtc-cu12)")

from livessb.engine import cuda_kernels as ck  # noqa: E402
from livessb.engine.nvrtc import compile_kernels  # noqa: E402

PAIR_WALKS = ("vp_eval", "vp_derivs", "energy_kernel", "reconstruct_kernel")


@functools.lru_cache(maxsize=2)
def _compile(alias: bool) -> tuple[int, str, str, dict[str, str]]:
    """(status, log, PTX, lowered name of each name expression) of one module."""
    out = compile_kernels(("-DALIAS_PIXELS=1",) if alias else ())
    return out.status, out.log, out.ptx, out.lowered


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


def _reads_param(body: str, index: int) -> bool:
    """Whether a kernel's PTX body loads its parameter ``index`` (an unused one is never
    loaded)."""
    return re.search(rf"ld\.param\.u64\s+%rd\d+, \[\w+_param_{index}\]", body) is not None


def test_only_the_alias_module_leaves_alias_pixels_out_and_its_walks_read_the_table() -> None:
    # The aliases are tested once per (bin, pixel) and rotation by alias_exclusion; the
    # pair walks read its table, row by row (a call per pair cost twice the default time).
    from test_cuda_launch_args import SIGNATURES

    _, _, default, names = _compile(False)
    _, _, alias, _ = _compile(True)
    assert "alias_shared" not in default
    plain, bodies = _entries(default), _entries(alias)
    for name, mangled in names.items():
        kernel = name.split("<")[0]
        calls = re.search(r"call[.\w]*[^;]*alias_shared", bodies[mangled]) is not None
        assert calls == (kernel == "alias_exclusion"), name
        if kernel in PAIR_WALKS:
            at = [p for _, p in SIGNATURES[kernel]].index("g_alias_tab")
            assert _reads_param(bodies[mangled], at), name
            assert not _reads_param(plain[mangled], at), name


@pytest.mark.parametrize("alias", [False, True], ids=["default", "alias"])
def test_float_quotients_take_the_sfu_reciprocal_alone(alias: bool) -> None:
    # __fdividef's div.approx.f32 rescales a denormal divisor in SASS (two FMULs, a
    # compare, two selects per quotient: ~36 of the ~180 instructions vp_eval<4> issues
    # per pixel); the kernels' divisors are normal floats, so fast_rcp (rcp.approx.ftz,
    # MUFU.RCP alone) gives the same bits.
    _, _, ptx, _ = _compile(alias)
    assert "div.approx.f32" not in ptx
    assert "div.full.f32" not in ptx and "div.rn.f32" not in ptx
    assert "rcp.approx.ftz.f32" in ptx

"""The CUDA engine's launch argument records against the kernels' source (no GPU, no CuPy).

Each ``*Args`` record in ``engine.cuda.launch`` must name its kernel's parameters in the
signature's order with the C scalar types' NumPy dtypes; every record construction in
the CUDA engine's source must pass one value per field, scalars as NumPy scalars of the
field's dtype; and the shared builders must produce such values.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
import typing
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from livessb.engine import cuda_kernels as ck
from livessb.engine.cuda import launch as la

C_SCALARS = {"int": np.int32, "long long": np.int64, "float": np.float32,
             "double": np.float64}
CUDA_SOURCES = sorted((Path(la.__file__).parent).glob("*.py"))


def _signatures() -> dict[str, list[tuple[str, str]]]:
    """kernel name -> [(C type, parameter name)] of every __global__ function."""
    src = re.sub(r"//[^\n]*", "", ck.source())
    out: dict[str, list[tuple[str, str]]] = {}
    bounds = r"__launch_bounds__\((?:[^()]|\([^()]*\))*\)\s*"  # (NT, EVAL_MINB_FOR(KC))
    for m in re.finditer(rf"__global__\s+void\s+(?:{bounds})?(\w+)\s*\(([^)]*)\)", src):
        params = []
        for p in m.group(2).split(","):
            words = p.replace("*", " * ").replace("__restrict__", " ").split()
            name = words[-1]
            ctype = " ".join(w for w in words[:-1] if w != "const")
            params.append((ctype, name))
        assert m.group(1) not in out, f"{m.group(1)} defined twice"
        out[m.group(1)] = params
    return out


SIGNATURES = _signatures()


def _hints(record: type) -> dict[str, Any]:
    return typing.get_type_hints(record, vars(la))


def test_source_parses_to_every_compiled_kernel() -> None:
    compiled = {n.split("<")[0] for n in ck._names()}
    assert compiled == set(SIGNATURES)
    assert len(SIGNATURES["vp_eval"]) == 23  # a parse that stopped early would not be
    # Every kernel the engine launches has a record (fma_peak is the benchmark's probe).
    assert {r.KERNEL for r in la.ARG_RECORDS} == compiled - {"fma_peak"}


@pytest.mark.parametrize("record", la.ARG_RECORDS, ids=lambda r: r.__name__)
def test_record_matches_kernel_signature(record: type[la.KernelArgs]) -> None:
    params = SIGNATURES[record.KERNEL]
    fields = dataclasses.fields(record)
    assert [f.name for f in fields] == [name for _, name in params]
    hints = _hints(record)
    for ctype, name in params:
        want = Any if "*" in ctype else C_SCALARS[ctype]
        assert hints[name] is want, (record.KERNEL, name, ctype, hints[name])


def _arrays(n: int) -> list[np.ndarray]:
    return [np.zeros(3) for _ in range(n)]


def _check_values(args: la.KernelArgs) -> None:
    hints = _hints(type(args))
    values = args.args()
    assert len(values) == len(dataclasses.fields(args))
    # in the signature's order, each field's own object (args() reads the instance dict)
    assert all(v is getattr(args, f.name)
               for f, v in zip(dataclasses.fields(args), values, strict=True))
    for f, v in zip(dataclasses.fields(args), values, strict=True):
        if hints[f.name] is Any:  # a device array in the engine, or a NULL pointer
            assert isinstance(v, np.ndarray) or v is la.NULL_POINTER, f.name
        else:
            assert type(v) is hints[f.name], (f.name, type(v), hints[f.name])


def test_builders_give_values_of_the_signature_dtypes() -> None:
    # Every pair kept (the default, or a scan that samples the band): no alias spacing on
    # the device, the default module's kernels.
    for spacing in (None, np.zeros(4), np.array([2.0, 2.0, 0.0, 0.0])):
        kept = la.KernelGeo.of(0.8, 0.02, 0.0197, spacing, np.asarray)
        assert kept.g_alias is la.NULL_POINTER and not kept.aliased
    geo = la.KernelGeo.of(0.8, 0.02, 0.0197, np.array([2.0, 1.6, 1.0, 1.0]), np.asarray)
    assert geo.aliased and isinstance(geo.g_alias, np.ndarray)
    G, nu_r, nu_c = _arrays(3)
    w = la.Window.of(G, 100, 60, (10, 10), nu_r, nu_c)
    k64, px, tab, cand, part, raw, dk, pairs = _arrays(8)
    _check_values(la.vp_eval_args(w, k64, px, tab, cand, geo, part, 128, raw, dk, pairs))
    # A scoring launch has no turns: an 8-byte NULL, as for vp_derivs' per_nu.
    assert la.vp_eval_args(w, k64, px, tab, cand, geo, part, 128, raw, dk).turn is (
        la.NULL_POINTER)
    _check_values(la.vp_derivs_args(w, k64, px, tab, cand, geo, part, 128, raw, pairs, 7, dk))
    # No per-frequency output wanted: an 8-byte NULL (CuPy turns None into 0xffffffff).
    unwanted = la.vp_derivs_args(w, k64, px, tab, cand, geo, part, 128, raw, pairs, 7).per_nu
    assert unwanted is la.NULL_POINTER and unwanted.dtype.itemsize == 8 and unwanted == 0
    _check_values(la.energy_args(w, k64, px, tab, geo, part, pairs, 128))
    # The exclusion table goes where the kernels read it, after the alias spacing.
    assert la.vp_eval_args(w, k64, px, tab, cand, geo, part, 128, raw, dk
                           ).g_alias_tab is tab
    assert geo.pilam == np.float64(np.pi * 0.0197) and type(geo.pilam) is np.float64


def _record_calls() -> list[tuple[Path, ast.Call, type[la.KernelArgs]]]:
    records = {r.__name__: r for r in la.ARG_RECORDS}
    out = []
    for path in CUDA_SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in records):
                out.append((path, node, records[node.func.id]))
    return out


def _scalar_source(expr: ast.expr) -> Any:
    """The dtype a scalar argument expression yields: np.<dtype>(...) or a field of the
    Window/KernelGeo records (``w.Nc``, ``self._kgeo.g_ka2``)."""
    if (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)
            and isinstance(expr.func.value, ast.Name) and expr.func.value.id == "np"):
        return getattr(np, expr.func.attr)
    if isinstance(expr, ast.Attribute):
        for holder in (la.Window, la.KernelGeo):
            hints = _hints(holder)
            if expr.attr in hints:
                return hints[expr.attr]
    return None


def test_every_record_construction_passes_each_field_with_its_dtype() -> None:
    calls = _record_calls()
    launched = {r for _, _, r in calls}
    # Built inline in the engine and memory modules, or by the builders in launch.py.
    assert launched == set(la.ARG_RECORDS)
    for path, call, record in calls:
        where = f"{path.name}:{call.lineno} {record.__name__}"
        assert not call.keywords, where
        fields = dataclasses.fields(record)
        assert len(call.args) == len(fields), where
        if path.name == "launch.py":
            continue  # the builders: checked by value above
        hints = _hints(record)
        for f, expr in zip(fields, call.args, strict=True):
            if hints[f.name] is not Any:
                assert _scalar_source(expr) is hints[f.name], (where, f.name)


def test_each_kernel_module_is_compiled_once_however_it_is_asked_for(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # module() at engine start and function(name) (module(False)) must share one module.
    built: list[bool] = []

    @functools.lru_cache(maxsize=2)
    def compiled(alias: bool) -> object:
        built.append(alias)
        return object()

    monkeypatch.setattr(ck, "_compiled", compiled)
    assert ck.module() is ck.module(False) is ck.module(alias=False)
    assert ck.module(True) is ck.module(alias=True) is not ck.module()
    assert built == [False, True]

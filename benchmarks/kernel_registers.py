"""Registers, spills and loop sizes of the CUDA kernels without a GPU: NVRTC compiles both
modules (default and alias, as tests/test_cuda_compile.py does) for sm_90, ptxas reports
each kernel's registers and spill bytes, and cuobjdump's SASS gives the instructions and the
local loads/stores (spills) inside loops. A kernel edit can be checked here before it
costs device time: the default module's hot kernels should not change unless meant to.

Needs ptxas and cuobjdump, which pip can fetch without installing a toolkit:
    pip download --no-deps nvidia-cuda-nvcc-cu12==12.9.86 nvidia-cuda-cuobjdump -d /tmp/nv
    (cd /tmp/nv && for w in *.whl; do unzip -q -o $w -d x; done)
Usage: python3 benchmarks/kernel_registers.py [--tools /tmp/nv/x] [-D OPTION ...] [--json OUT]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from livessb.engine import cuda_kernels as ck

HOT = ("vp_eval", "vp_derivs", "energy_kernel", "reconstruct_kernel", "alias_exclusion",
       "support_mask")


def nvrtc_ptx(options: list[str]) -> str:
    import nvidia.cuda_nvrtc as pkg

    lib_dir = next(Path(p) / "lib" for p in pkg.__path__)
    lib = ctypes.CDLL(str(next(lib_dir.glob("libnvrtc.so*"))))
    prog = ctypes.c_void_p()
    lib.nvrtcCreateProgram(ctypes.byref(prog), ck.source().encode(), b"livessb.cu", 0, None,
                           None)
    for name in ck._names():
        lib.nvrtcAddNameExpression(prog, name.encode())
    opts = [o.encode() for o in ["-std=c++17", "--gpu-architecture=compute_90", *options]]
    status = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    size = ctypes.c_size_t()
    if status != 0:
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        raise SystemExit(f"NVRTC failed ({options}):\n{log.value.decode()[-3000:]}")
    lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
    buf = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetPTX(prog, buf)
    return buf.value.decode()


def ptxas_report(ptxas: Path, ptx: Path, cubin: Path) -> dict[str, dict[str, int]]:
    """Per kernel (mangled name): registers and spill store/load bytes."""
    out = subprocess.run([str(ptxas), "-arch=sm_90", "-v", str(ptx), "-o", str(cubin)],
                         capture_output=True, text=True, check=True).stderr
    report: dict[str, dict[str, int]] = {}
    current, spills = None, (0, 0)
    for line in out.splitlines():
        if m := re.search(r"Compiling entry function '(\w+)'", line):
            current = m.group(1)
        elif m := re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line):
            spills = (int(m.group(1)), int(m.group(2)))
        elif (m := re.search(r"Used (\d+) registers", line)) and current:
            report[current] = {"registers": int(m.group(1)), "spill_stores": spills[0],
                               "spill_loads": spills[1]}
            current = None
    return report


def loop_report(cuobjdump: Path, cubin: Path) -> dict[str, dict[str, int]]:
    """Per kernel: instructions, and local loads/stores inside any loop (a backward branch)."""
    sass = subprocess.run([str(cuobjdump), "-sass", str(cubin)], capture_output=True,
                          text=True, check=True).stdout
    report = {}
    for body in re.split(r"\n\s+Function : ", sass)[1:]:
        name = body.split("\n", 1)[0].strip()
        ins = [(int(m.group(1), 16), m.group(2)) for m in
               re.finditer(r"/\*([0-9a-f]{4,})\*/\s+(.*?);", body)]
        loops = [(int(t, 16), a) for a, text in ins
                 for t in re.findall(r"BRA .*?0x([0-9a-f]+)", text) if int(t, 16) < a]
        inside = [text for a, text in ins if any(s <= a <= e for s, e in loops)]
        report[name] = {"instructions": len(ins),
                        "loop_local_stores": sum("STL" in t for t in inside),
                        "loop_local_loads": sum("LDL" in t for t in inside)}
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--tools", type=Path, default=Path("/tmp/nv/x"),
                    help="where the unpacked wheels put nvidia/*/bin (ptxas, cuobjdump)")
    ap.add_argument("-D", action="append", default=[], metavar="OPTION",
                    help="a -D option for both modules (e.g. RECON_MINB=7)")
    ap.add_argument("--json", type=Path, help="write the report here too")
    args = ap.parse_args()
    tools = {p.name: p for p in args.tools.rglob("*") if p.name in ("ptxas", "cuobjdump")}
    if len(tools) < 2:
        raise SystemExit(f"ptxas and cuobjdump not found under {args.tools}: see the "
                         "docstring (pip download … then unzip)")
    for p in tools.values():
        p.chmod(0o755)
    defines = [f"-D{d}" for d in args.D]
    result: dict[str, Any] = {"defines": defines}
    with tempfile.TemporaryDirectory() as tmp:
        for module, extra in (("default", []), ("alias", ["-DALIAS_PIXELS=1"])):
            ptx, cubin = Path(tmp, f"{module}.ptx"), Path(tmp, f"{module}.cubin")
            ptx.write_text(nvrtc_ptx(defines + extra))
            regs = ptxas_report(tools["ptxas"], ptx, cubin)
            loops = loop_report(tools["cuobjdump"], cubin)
            names = {mangled: name for name in ck._names()
                     if (mangled := _mangled_match(name, regs)) is not None}
            rows = {}
            for mangled, name in sorted(names.items(), key=lambda x: x[1]):
                if name.split("<")[0] in HOT:
                    rows[name] = {**regs[mangled], **loops.get(mangled, {})}
                    print(f"{module:8s} {name:34s} {rows[name]}")
            result[module] = rows
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


def _mangled_match(name: str, regs: dict[str, dict[str, int]]) -> str | None:
    """The mangled entry of a name expression (``vp_eval<4, false>`` → _Z7vp_evalILi4ELb0…)."""
    base, _, targs = name.partition("<")
    parts = [a.strip() for a in targs.rstrip(">").split(",")] if targs else []
    enc = "".join("Lb1E" if a == "true" else "Lb0E" if a == "false" else f"Li{a}E"
                  for a in parts if a in ("true", "false") or a.isdigit())
    prefix = f"_Z{len(base)}{base}" + (f"I{enc}E" if parts else "")
    hits = [m for m in regs if m.startswith(prefix)] if enc or not parts else []
    return hits[0] if len(hits) == 1 else None


if __name__ == "__main__":
    main()

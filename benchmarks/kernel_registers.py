"""Registers, spills and loop sizes of the CUDA kernels without a GPU: NVRTC compiles both
modules (default and alias; livessb.engine.nvrtc, as tests/test_cuda_compile.py does) for
sm_90, ptxas reports
each kernel's registers and spill bytes, and cuobjdump's SASS gives the instructions and the
local loads/stores (spills) inside loops. A kernel edit can be checked here before it
costs device time: the default module's hot kernels should not change unless meant to.

Needs ptxas, cuobjdump and nvdisasm (cuobjdump 13 calls it), which pip can fetch without
installing a toolkit:
    pip download --no-deps nvidia-cuda-nvcc==13.0.88 nvidia-cuda-cuobjdump \
        nvidia-cuda-nvdisasm -d /tmp/nv && (cd /tmp/nv && for w in *.whl; do
        unzip -q -o $w -d x13; done); export PATH=/tmp/nv/x13/nvidia/cu13/bin:$PATH
Usage: python3 benchmarks/kernel_registers.py [--tools /tmp/nv/x13] [-D OPTION ...] [--json OUT]
(benchmarks/sass_compare.py COMMIT: whether the kernels' code is that of another commit)
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from livessb.engine import cuda_kernels as ck
from livessb.engine.nvrtc import compile_kernels

HOT = ("vp_eval", "vp_derivs", "energy_kernel", "reconstruct_kernel", "alias_exclusion",
       "support_mask")


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
            compiled = compile_kernels(defines + extra)
            if compiled.status != 0:
                raise SystemExit(f"NVRTC failed ({module}, {defines}):\n{compiled.log[-3000:]}")
            ptx, cubin = Path(tmp, f"{module}.ptx"), Path(tmp, f"{module}.cubin")
            ptx.write_text(compiled.ptx)
            regs = ptxas_report(tools["ptxas"], ptx, cubin)
            loops = loop_report(tools["cuobjdump"], cubin)
            rows = {}
            for name in sorted(ck._names()):
                if name.split("<")[0] in HOT:
                    mangled = compiled.lowered[name]
                    rows[name] = {**regs[mangled], **loops.get(mangled, {})}
                    print(f"{module:8s} {name:34s} {rows[name]}")
            result[module] = rows
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

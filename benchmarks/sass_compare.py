"""Whether kernels compile to the same machine code as at another commit, without a GPU.

A kernel edit meant to leave other kernels alone can still change their code (a parameter
less shifts every constant-bank offset and so the register allocation: vp_eval<4, false>
ran 2.6 % slower that way at f1c2c2a). This compiles both sources with NVRTC for sm_90,
assembles them with ptxas and compares each kernel's SASS (cuobjdump) instruction for
instruction, addresses left out. Same SASS: the measured speed carries over.

Needs ptxas, cuobjdump and nvdisasm from pip wheels (no toolkit install):
    pip download --no-deps nvidia-cuda-nvcc==13.0.88 nvidia-cuda-cuobjdump \\
        nvidia-cuda-nvdisasm -d /tmp/nv && (cd /tmp/nv && for w in *.whl; do
        unzip -q -o $w -d x13; done)
Usage: python3 benchmarks/sass_compare.py COMMIT [--tools /tmp/nv/x13] [KERNEL ...]
(KERNEL: name expressions of cuda_kernels._names(); default: the hot kernels.)
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOT = ("vp_eval<1, false>", "vp_eval<2, false>", "vp_eval<4, false>", "vp_eval<4, true>",
       "vp_derivs", "energy_kernel", "support_mask", "reconstruct_kernel<1, false>",
       "reconstruct_kernel<1, true>", "reconstruct_kernel<4, true>")


def sass_of(python_dir: Path, names: list[str], tools: Path, tmp: Path) -> dict[str, list[str]]:
    """Each kernel's SASS instructions (no addresses) compiled from ``python_dir``."""
    code = f"""
import sys, json
sys.path.insert(0, {str(python_dir)!r})
from livessb.engine.nvrtc import compile_kernels
c = compile_kernels([])
assert c.status == 0, c.log[-3000:]
open({str(tmp / 'k.ptx')!r}, 'w').write(c.ptx)
print(json.dumps({{n: c.lowered[n] for n in {names!r}}}))
"""
    import json

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    mangled = json.loads(out.strip().splitlines()[-1])
    bin_dir = next(p.parent for p in tools.rglob("ptxas"))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    subprocess.run(["ptxas", "-arch=sm_90", str(tmp / "k.ptx"), "-o", str(tmp / "k.cubin")],
                   check=True, env=env)
    result = {}
    for name, m in mangled.items():
        text = subprocess.run(["cuobjdump", "-sass", "-fun", m, str(tmp / "k.cubin")],
                              capture_output=True, text=True, check=True, env=env).stdout
        result[name] = [re.sub(r"/\*[0-9a-f]+\*/", "", i.group(1)).strip()
                        for i in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(.*?;)", text)]
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("commit", help="the reference commit (its python/ is compiled)")
    ap.add_argument("kernels", nargs="*", default=list(HOT))
    ap.add_argument("--tools", type=Path, default=Path("/tmp/nv/x13"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        ref = tmp / "ref"
        ref.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.commit, "python"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(ref)], input=archive, check=True)
        (tmp / "a").mkdir()
        (tmp / "b").mkdir()
        old = sass_of(ref / "python", args.kernels, args.tools, tmp / "a")
        new = sass_of(ROOT / "python", args.kernels, args.tools, tmp / "b")
    for name in args.kernels:
        same = old[name] == new[name]
        print(f"{name:32s} {args.commit} {len(old[name]):5d}  here {len(new[name]):5d}  "
              f"{'same SASS' if same else 'differs'}")


if __name__ == "__main__":
    main()

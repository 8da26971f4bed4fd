"""The CUDA source and its Python mirror agree (no GPU needed)."""

import re

from livessb.engine import cuda_kernels as ck


def test_kernel_constants_match_their_python_mirrors() -> None:
    src = ck.source()
    for name, value in (("BT", ck.BT), ("NT", ck.NT), ("NQ", ck.NQ), ("NA", ck.NA),
                        ("GT", ck.GATHER_TILE)):
        assert re.search(rf"^#define {name} {value}\b", src, re.MULTILINE), name


def test_every_compiled_kernel_is_defined_once() -> None:
    src = ck.source()
    for name in {n.split("<")[0] for n in ck._names()}:
        found = re.findall(rf"__global__ void [^\n]*?\b{name}\(", src)
        assert len(found) == 1, name

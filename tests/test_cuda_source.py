"""The CUDA source agrees with its Python mirror, and host-side engine helpers (no GPU)."""

import re

import numpy as np

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


def test_device_bytes_count_shared_geometry_once() -> None:
    """Windows at one rotation share their geometry rows: memory_info counts them once."""
    from livessb.engine.cuda.memory import device_bytes
    from livessb.engine.cuda.records import CUDAPart, FineMasks, RotationGeometry

    rows = RotationGeometry(np.zeros((100, 2)), np.zeros((100, 4), dtype=np.float32),
                            np.zeros(2))
    nu = np.zeros(10), np.zeros(6)
    full = CUDAPart(*nu, M=60, geometry=rows,
                    fine_masks=FineMasks(3, np.zeros(50, dtype=np.uint32), 7))
    region = CUDAPart(np.zeros(4), np.zeros(3), M=12, geometry=rows,
                      energies={(0.1, False): (1.0, 2)})
    arrays = [*rows.arrays(), *full.arrays(), *region.arrays()]
    assert device_bytes(arrays, np.ndarray) == 1600 + 1600 + 16 + 80 + 48 + 200 + 32 + 24

"""The CUDA source agrees with its Python mirror, and host-side engine helpers (no GPU)."""

import re

import numpy as np
import pytest

from livessb.engine import cuda_kernels as ck


def test_kernel_constants_match_their_python_mirrors() -> None:
    src = ck.source()
    for name, value in (("BT", ck.BT), ("NT", ck.NT), ("NQ", ck.NQ), ("NA", ck.NA), ("NS", ck.NS),
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
                    fine_masks={1: FineMasks(3, 1, np.zeros(50, dtype=np.uint32), 7)})
    region = CUDAPart(np.zeros(4), np.zeros(3), M=12, geometry=rows,
                      energies={(0.1, False): (1.0, 2)})
    arrays = [*rows.arrays(), *full.arrays(), *region.arrays()]
    assert device_bytes(arrays, np.ndarray) == 1600 + 1600 + 16 + 80 + 48 + 200 + 32 + 24


# Half planes of the engine's grids: the benchmark (512², its 3× Auto grid), regions and
# map tiles, 5-smooth sizes that leave rows and columns outside whole tiles, tiny scans.
SLOT_GRIDS = ((512, 257), (1536, 769), (128, 65), (64, 33), (135, 68), (126, 61), (6, 4),
              (4, 8), (3, 2), (1, 1))


def test_kernel_tile_shapes_match_their_python_mirrors() -> None:
    src = ck.source()
    for name, value in (("TILE_R", ck.TILE_R), ("TILE_C", ck.TILE_C),
                        ("RECON_STRIP_MAX_K", ck.RECON_STRIP_MAX_K)):
        assert re.search(rf"^#define {name} {value}\b", src, re.MULTILINE), name
    assert [ck.recon_tile_rows(k) for k in ck.RECON_GROUPS] == [1, ck.TILE_R, ck.TILE_R]


@pytest.mark.parametrize("rows, H", SLOT_GRIDS)
def test_slot_bins_are_a_bijection_whose_warps_are_tiles(rows: int, H: int) -> None:
    """Every bin has one slot (launches keep ceil(M / NT) blocks), and the warps of the
    rows and columns that whole tiles cover each own one tile (TILE_R × TILE_C, each of
    its rows adjacent bins); strips (one row) are the identity."""
    np.testing.assert_array_equal(ck.slot_bins(rows, H, 1), np.arange(rows * H))
    tr, tc = ck.TILE_R, ck.TILE_C
    bins = ck.slot_bins(rows, H)
    assert bins.shape == (rows * H,)
    np.testing.assert_array_equal(np.sort(bins), np.arange(rows * H))
    r, c = np.divmod(bins, H)
    n_tiled = (rows - rows % tr) * (H - H % tc)
    assert n_tiled % 32 == 0
    for w in range(n_tiled // 32):
        wr, wc = r[32 * w:32 * w + 32], c[32 * w:32 * w + 32]
        assert np.ptp(wr) == tr - 1 and np.ptp(wc) == tc - 1
        assert wr.min() % tr == 0 and wc.min() % tc == 0
        np.testing.assert_array_equal(wc[:tc], wc.min() + np.arange(tc))


def test_a_window_keeps_the_energy_of_a_rotation_for_its_mirror() -> None:
    """CUDAPart.energy_at: θ's kept energy serves θ ± π (the same trotter pairs), with
    the same transpose only; any other θ is computed."""
    import math

    from livessb.engine.cuda.records import CUDAPart

    part = CUDAPart(nu_r=None, nu_c=None, M=1)
    assert part.energy_at(0.3, False) is None
    part.energies[0.3, False] = (12.5, 40)
    assert part.energy_at(0.3, False) == (12.5, 40)
    assert part.energy_at(0.3 + math.pi, False) == (12.5, 40)
    assert part.energy_at(0.3 - math.pi, False) == (12.5, 40)
    assert part.energy_at(math.radians(math.degrees(0.3 + math.pi) % 360.0), False) == (12.5, 40)
    assert part.energy_at(0.3 + math.pi, True) is None
    assert part.energy_at(0.3 + 2 * math.pi, False) is None  # (a turn: not its mirror)
    assert part.energy_at(0.3 + math.pi + 1e-6, False) is None

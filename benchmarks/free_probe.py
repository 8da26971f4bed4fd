"""How long returning device memory to the driver takes, by allocation layout (device run).

Usage: python3 benchmarks/free_probe.py OUT.json
close() must hand the session's ~14 GB back (free_all_blocks); this separates the cost
per byte from the cost per allocation, and times the pinned host pool's release.
"""

from __future__ import annotations

import json
import sys
import time

import cupy as cp

GIB = 1 << 30


def pool_free(total: int, pieces: int) -> float:
    """Median seconds of free_all_blocks after holding ``total`` bytes in ``pieces``."""
    pool = cp.get_default_memory_pool()
    times = []
    for _ in range(3):
        arrays = [cp.empty(total // pieces, dtype=cp.uint8) for _ in range(pieces)]
        for a in arrays:
            a[:1] = 0
        cp.cuda.Device().synchronize()
        del arrays
        t0 = time.perf_counter()
        pool.free_all_blocks()
        times.append(time.perf_counter() - t0)
    return sorted(times)[1]


def raw_free(total: int) -> float:
    """cudaFree of one cudaMalloc of ``total`` bytes (no pool)."""
    rt = cp.cuda.runtime
    ptr = rt.malloc(total)
    rt.memset(ptr, 0, 1)
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    rt.free(ptr)
    return time.perf_counter() - t0


def pinned_free(blocks: int, size: int) -> float:
    pool = cp.get_default_pinned_memory_pool()
    mems = [cp.cuda.alloc_pinned_memory(size) for _ in range(blocks)]
    del mems
    t0 = time.perf_counter()
    pool.free_all_blocks()
    return time.perf_counter() - t0


def main() -> None:
    out: dict[str, float] = {}
    for total_gib in (4, 14):
        for pieces in (1, 8, 64):
            out[f"pool_{total_gib}GiB_in_{pieces}"] = pool_free(total_gib * GIB, pieces)
    out["raw_cudaFree_14GiB"] = raw_free(14 * GIB)
    out["pinned_12x2MiB"] = pinned_free(12, 2 << 20)
    out["pinned_1x24MiB"] = pinned_free(1, 24 << 20)
    for k, v in out.items():
        print(f"{k:28s} {v * 1e3:8.2f} ms")
    json.dump(out, open(sys.argv[1], "w"), indent=1)


if __name__ == "__main__":
    main()

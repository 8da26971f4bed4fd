"""The Dask cluster a series runs on: a given client, an existing scheduler
(``--scheduler ADDRESS``), or an embedded one started here and closed afterwards:
one worker per GPU through dask-cuda's ``LocalCUDACluster`` where CUDA is present
(dask-cuda is optional: without it, one worker on the first GPU), otherwise CPU worker
processes sized to the machine (each scan's fit already uses several cores)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dask
from distributed import Client, LocalCluster

from .worker import SeriesWorker

CORES_PER_CPU_WORKER = 4  # the CPU engine's Numba kernels run in parallel within a scan
# Dask's default sets MALLOC_TRIM_THRESHOLD_ too, which turns off glibc's adaptive mmap
# threshold: every large temporary of a fit is then mapped and page-faulted afresh.
SPAWN_ENVIRON: dict[str, str] = {}


@dataclass
class ClusterHandle:
    """The client to submit to, and the cluster when this series started it."""

    client: Client
    cluster: Any | None
    description: str
    dashboard: str | None
    own_client: bool = True

    def close(self) -> None:
        """Close what this series opened: its client, and its cluster (a joined cluster
        is left running, a given client open)."""
        if self.own_client:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def cpu_workers(requested: int | None) -> int:
    if requested is not None:
        return requested
    return max(1, (os.cpu_count() or 1) // CORES_PER_CPU_WORKER)


def thread_environment(n_workers: int) -> dict[str, str]:
    """Threads for each worker's engine: Dask's nannies set OMP_NUM_THREADS=1 (one task
    per thread), but a worker here runs one scan at a time whose Numba kernels are
    parallel: give each its share of the cores (measured: the reference fit of a 64²
    scan took 19.2 s on one worker at 1 thread, 9.9 s in the client's process at 2)."""
    threads = str(max(1, (os.cpu_count() or 1) // max(1, n_workers)))
    return {name: threads for name in ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS",
                                       "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}


def _gpu_count(device: str) -> int:
    if device == "cpu":
        return 0
    from ..engine import cuda_available

    if not cuda_available():
        return 0
    import cupy

    return int(cupy.cuda.runtime.getDeviceCount())


def start_local(workers: int | None, device: str,
                say: Callable[[str], None]) -> tuple[Any, str]:
    """An embedded cluster: GPUs first, CPU processes otherwise."""
    if workers is not None and workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers}")
    dashboard = ":0" if importlib.util.find_spec("bokeh") else None
    gpus = _gpu_count(device)
    if gpus:
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError:
            say("dask-cuda is not installed: one worker on the first GPU "
                "(pip install dask-cuda for one worker per GPU)")
            return (LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                 dashboard_address=dashboard, env=thread_environment(1)),
                    "1 GPU worker (no dask-cuda)")
        n = min(workers or gpus, gpus)
        return (LocalCUDACluster(n_workers=n, threads_per_worker=1,
                                 dashboard_address=dashboard, env=thread_environment(n)),
                f"{n} GPU worker(s)")
    n = cpu_workers(workers)
    with dask.config.set({"distributed.nanny.pre-spawn-environ": SPAWN_ENVIRON}):
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=dashboard, env=thread_environment(n))
    return cluster, f"{n} CPU worker process(es)"


def connect(client: Client | None = None, scheduler: str | None = None,
            workers: int | None = None, device: str = "auto",
            say: Callable[[str], None] = print) -> ClusterHandle:
    """The cluster to run on, with the series' worker plugin registered."""
    if client is not None:
        handle = ClusterHandle(client, None, "the given client", _link(client),
                               own_client=False)
    elif scheduler is not None:
        try:
            joined = Client(scheduler, timeout="20s")
        except OSError as exc:
            raise OSError(f"cannot reach the Dask scheduler at {scheduler!r} ({exc}): start "
                          "one (dask scheduler; dask worker ADDRESS) or leave out "
                          "--scheduler to run on this machine") from None
        handle = ClusterHandle(joined, None, f"the cluster at {scheduler}", _link(joined))
    else:
        cluster, what = start_local(workers, device, say)
        started = Client(cluster)
        handle = ClusterHandle(started, cluster, f"an embedded cluster: {what}", _link(started))
        say(f"started {handle.description}; dashboard: "
            f"{handle.dashboard or 'not served (pip install bokeh for the Dask dashboard)'}")
    handle.client.register_plugin(SeriesWorker())
    return handle


def _link(client: Client) -> str | None:
    if importlib.util.find_spec("bokeh") is None:
        return None
    try:
        return str(client.dashboard_link)
    except (KeyError, AttributeError):
        return None

"""The benchmark record: statistics, provenance (commit, versions), JSON and the table."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from ..atomic import atomic_write_text
from .workload import TARGETS_S


def stats(values: list[float]) -> dict[str, Any]:
    """First run, warm median and p90 (warm: every run after the first)."""
    warm = values[1:] if len(values) > 1 else values
    return {"first": values[0], "warm_median": float(np.median(warm)),
            "warm_p90": float(np.percentile(warm, 90)), "all": values}


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Engine counters that changed between two snapshots."""
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


def newton_trace(steps: list[dict[str, Any]]) -> list[list[Any]]:
    """[branch, iteration, points differentiated, accepted] per derivatives call."""
    calls: dict[tuple[str, int], list[int]] = {}
    for st in steps:
        row = calls.setdefault((str(st.get("branch", 0)), int(st["iteration"])), [0, 0])
        row[0] += 1
        row[1] += int(bool(st["accepted"]))
    return [[b, it, n, ok] for (b, it), (n, ok) in calls.items()]


def git_commit() -> str | None:
    env = os.environ.get("LIVESSB_COMMIT")
    if env:
        return env
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, timeout=10).stdout.strip() or None
    except Exception:
        return None


def device_name(device: str) -> str:
    """The GPU's name for "cuda", else the host's processor and core count."""
    if device == "cuda":
        import cupy as cp

        return str(cp.cuda.runtime.getDeviceProperties(0)["name"].decode())
    return f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores)"


def versions(version: str) -> dict[str, Any]:
    import scipy

    out: dict[str, Any] = {"livessb": version, "python": platform.python_version(),
                           "numpy": np.__version__, "scipy": scipy.__version__}
    try:
        import cupy as cp

        out["cupy"] = cp.__version__
        out["cuda_runtime"] = cp.cuda.runtime.runtimeGetVersion()
        out["cuda_driver"] = cp.cuda.runtime.driverGetVersion()
    except Exception:
        pass
    return out


def json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, bytes):
        return o.decode()
    return str(o)


def write_json(result: dict[str, Any], json_path: str | Path) -> None:
    """Atomically; the folder must exist (the folder rule: run_benchmark checks it first)."""
    atomic_write_text(json_path, json.dumps(result, indent=1, default=json_default))


def print_table(result: dict[str, Any]) -> None:
    rows = [(k, v["first"], v["warm_median"], v["warm_p90"])
            for k, v in result["times_s"].items()]
    print(f"{'operation':28s} {'first':>9s} {'median':>9s} {'p90':>9s} {'target':>8s}")
    for k, f, m, q in rows:
        t = TARGETS_S.get(k)
        print(f"{k:28s} {f:9.4f} {m:9.4f} {q:9.4f} {'' if t is None else f'{t:8.3f}'}")

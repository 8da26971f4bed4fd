"""Where the host's time goes in GPU region fits and maps: a sampling profiler (device run).

cProfile charges every Python call and distorts a map's thousands of small calls; this
samples every thread's stack (``sys._current_frames``) every ~0.5 ms instead, so the
figures are those of an unprofiled run. Each sample of a thread is classed as a wait (a
lock, a download, a device sync) or host work, and host work is charged to its innermost
livessb frame (the line whose call, CuPy's or NumPy's included, takes the time) and to its
innermost frame of any module. Also counted: cyclic collections (``gc.callbacks``) and
CuPy plan caches made by short-lived threads (each one's end runs a full ``gc.collect``).

Usage: python3 benchmarks/host_sampler.py OUT.json [RUNS]
With CUDA_LAUNCH_BLOCKING=1 in the environment every launch waits for its kernel, so the
map's per-call engine seconds ("engine" of each "map" entry) are what the device spends on
each kind of call (the host's part included; compare with an ordinary run's wall time).
"""

from __future__ import annotations

import collections
import gc
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

REGION = (192, 320, 192, 320)
WAITS = ("acquire", "wait", "synchronize", "_wait_for_download", "join", "get")
TOP = 40


class Sampler(threading.Thread):
    """Samples the other threads' stacks until ``stop``; counts per class and frame."""

    def __init__(self, interval_s: float = 5e-4) -> None:
        super().__init__(daemon=True, name="sampler")
        self.interval_s = interval_s
        self.halt = threading.Event()
        self.samples = 0
        self.busy_samples = 0  # samples in which some thread did host work
        self.by_state: collections.Counter[str] = collections.Counter()
        self.ours: collections.Counter[str] = collections.Counter()
        self.leaf: collections.Counter[str] = collections.Counter()

    def run(self) -> None:
        me = threading.get_ident()
        names = {t.ident: t.name for t in threading.enumerate()}
        while not self.halt.is_set():
            frames = sys._current_frames()
            busy = False
            for tid, frame in frames.items():
                if tid == me:
                    continue
                name = names.get(tid)
                if name is None:
                    names = {t.ident: t.name for t in threading.enumerate()}
                    name = names.get(tid, "?")
                kind = "lockstep" if name.startswith("lockstep") else (
                    "main" if name == "MainThread" else "other")
                if kind == "other":
                    continue
                code = frame.f_code
                where = f"{Path(code.co_filename).name}:{code.co_name}"
                waiting = code.co_name in WAITS and ("threading" in code.co_filename
                                                     or "xp.py" in code.co_filename
                                                     or "lockstep" in code.co_filename)
                if code.co_name == "get" and "xp.py" not in code.co_filename:
                    waiting = False
                # A download's .get() is a CuPy C call: its frame is our _download line.
                ours = None
                f: Any = frame
                while f is not None:
                    if "livessb" in f.f_code.co_filename:
                        ours = f"{Path(f.f_code.co_filename).name}:{f.f_code.co_name}:{f.f_lineno}"
                        break
                    f = f.f_back
                if ours is not None and ("xp.py:_download" in ours or "xp.py:wait" in ours
                                         or "lockstep.py:_wait_for_download" in ours
                                         or "lockstep.py:_give_turn" in ours
                                         or ("lockstep.py:_body" in ours and waiting)):
                    waiting = True
                state = f"{kind}:{'wait' if waiting else 'host'}"
                self.by_state[state] += 1
                if not waiting:
                    busy = True
                    self.ours[ours or "(none)"] += 1
                    self.leaf[where] += 1
            self.samples += 1
            self.busy_samples += busy
            time.sleep(self.interval_s)

    def stop(self) -> dict[str, Any]:
        self.halt.set()
        self.join()
        return {"samples": self.samples, "busy_fraction": self.busy_samples / max(1, self.samples),
                "by_state": dict(self.by_state),
                "ours_top": self.ours.most_common(TOP), "leaf_top": self.leaf.most_common(TOP)}


class GcClock:
    def __init__(self) -> None:
        self.t0 = 0.0
        self.seconds = 0.0
        self.by_generation: collections.Counter[int] = collections.Counter()

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.t0 = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self.t0
            self.by_generation[info["generation"]] += 1


def main() -> None:
    import cupy as cp
    import cupy.fft._fft as cfft_mod

    from livessb.bench.backend import backend_for
    from livessb.bench.report import delta
    from livessb.session import Session

    out_path = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    plan_caches: collections.Counter[str] = collections.Counter()
    original = cfft_mod.get_plan_cache

    def counted() -> Any:
        plan_caches[threading.current_thread().name.split("-")[0]] += 1
        return original()

    cfft_mod.get_plan_cache = counted
    sync = cp.cuda.Device().synchronize
    ds, _ = backend_for("cuda").generate((512, 512), (192, 192), "uint16", 42)
    record: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"),
                              "commit": os.environ.get("LIVESSB_COMMIT", "unknown"),
                              "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()}
    clock = GcClock()
    gc.callbacks.append(clock)

    def phase(name: str, fn: Any, sample: bool) -> Any:
        sync()
        before_gc, before_counts = clock.seconds, dict(clock.by_generation)
        plans_before = dict(plan_caches)
        sampler = Sampler() if sample else None
        old = sys.getswitchinterval()
        if sampler is not None:
            sys.setswitchinterval(1e-4)  # the sampler gets the GIL every ~0.1 ms
            sampler.start()
        t0 = time.perf_counter()
        result = fn()
        sync()
        wall = time.perf_counter() - t0
        entry: dict[str, Any] = {"wall_s": wall, "gc_s": clock.seconds - before_gc,
                                 "gc_collections": {g: clock.by_generation[g]
                                                    - before_counts.get(g, 0) for g in range(3)},
                                 "plan_cache_calls": {k: v - plans_before.get(k, 0)
                                                      for k, v in plan_caches.items()}}
        if sampler is not None:
            entry["sampled"] = sampler.stop()
            sys.setswitchinterval(old)
        timings = getattr(result, "timings", None)
        if isinstance(timings, dict):
            entry["timings"] = {k: v for k, v in timings.items() if isinstance(v, float)}
        record.setdefault(name, []).append(entry)
        print(f"{name}: {wall:.4f} s, gc {entry['gc_s']:.4f} s "
              f"{entry['gc_collections']}, plan caches {entry['plan_cache_calls']}", flush=True)
        return result

    with Session(ds, device="cuda") as s:
        diag = s.diagnostics
        phase("fit", lambda: s.fit(trials=200, seed=42, progress=False), False)
        phase("map_first", lambda: s.fit_map(tile=(64, 64), trials=200, seed=42,
                                              progress=False), False)
        for _ in range(runs):
            phase("region128", lambda: s.fit_region(REGION, trials=200, seed=42), False)
        for _ in range(runs):
            before = diag.stats
            phase("map", lambda: s.fit_map(tile=(64, 64), trials=200, seed=42,
                                            progress=False), False)
            # Under CUDA_LAUNCH_BLOCKING=1 each engine call's seconds are its device time
            # (plus its host's): where a device-bound map spends it.
            record["map"][-1]["engine"] = delta(before, diag.stats)
        phase("region128_sampled", lambda: s.fit_region(REGION, trials=200, seed=42), True)
        phase("map_sampled", lambda: s.fit_map(tile=(64, 64), trials=200, seed=42,
                                                progress=False), True)
    Path(out_path).write_text(json.dumps(record, indent=1, default=str))


if __name__ == "__main__":
    main()

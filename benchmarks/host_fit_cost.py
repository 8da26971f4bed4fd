"""The host's own cost of one window fit (a region, a map tile): its engine calls recorded
once, then replayed, so what is timed is the fit logic alone (proposals, Newton steps,
errors, model choice), the part a GPU map's lockstep cannot overlap with the device.

Usage: python benchmarks/host_fit_cost.py [--scan 128] [--tile 64] [--reps 30] [--profile]
The replayed fit must give the recorded fit's record (checked), so the figure is that of
the code path a real fit takes. CPU engine, small detector (the logic does not depend on
the BF pixels); the window's frequencies (tile²/2) set the size of its per-ν work.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import time
from typing import Any

import numpy as np

from livessb import Session
from livessb.fit.region import WindowSpec, fit_window
from livessb.fit.search import Box
from livessb.progress import progress_enabled
from livessb.simulate import simulate_4dstem


def _fresh(x: Any) -> Any:
    """A copy of what a caller may change in place (arrays, their tuples and lists)."""
    if isinstance(x, np.ndarray):
        return x.copy()
    if isinstance(x, tuple | list):
        return type(x)(_fresh(v) for v in x)
    return x


class Replay:
    """The engine's calls recorded in order, then answered from the record."""

    def __init__(self, engine: Any) -> None:
        self._engine, self.calls, self.replaying, self.at = engine, [], False, 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._engine, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.replaying:
                recorded, out = self.calls[self.at]
                self.at += 1
                assert recorded == name, f"replay diverged: {recorded} recorded, {name} asked"
                return _fresh(out)
            out = attr(*args, **kwargs)
            self.calls.append((name, _fresh(out)))
            return out
        return call


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scan", type=int, default=128)
    ap.add_argument("--tile", type=int, default=64)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    ds, _ = simulate_4dstem(scan_shape=(a.scan, a.scan), detector_shape=(24, 24),
                            scan_step_A=0.6, aberrations={"C10": -60.0, "C12": 10.0,
                                                          "phi12": 0.3},
                            dose=2e4, seed=3, rotation_deg=8.0)
    with Session(ds, device="cpu") as s, progress_enabled(False):
        s.fit(trials=200, seed=1, progress=False)
        engine = Replay(s.diagnostics.engine)
        spec = WindowSpec(200, 1, Box.from_mapping(None), {}, "vp", "native", ds)
        args = (engine, (0, a.tile, 0, a.tile), s._theta, float(s.rotation_deg or 0.0),
                bool(s.transpose), spec, {})
        recorded = fit_window(*args)
        engine.replaying = True

        def replay() -> Any:
            engine.at = 0
            return fit_window(*args)

        times, errors_s = [], []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            got = replay()
            times.append(time.perf_counter() - t0)
            errors_s.append(got.timings["errors_s"])
        assert (got.params, got.errors, got.newton) == \
            (recorded.params, recorded.errors, recorded.newton), "replay changed the fit"
        print(json.dumps({"window": a.tile, "engine_calls": len(engine.calls),
                          "host_ms_median": round(float(np.median(times)) * 1e3, 3),
                          "host_ms_min": round(min(times) * 1e3, 3),
                          "errors_ms_median": round(float(np.median(errors_s)) * 1e3, 3)}))
        if a.profile:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(10):
                replay()
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(40)


if __name__ == "__main__":
    main()

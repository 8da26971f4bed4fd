"""Widget latency in a real browser: mouse release -> region crop painted.

Measured (not a test) on the CPU demo dataset: JupyterLab on localhost, the
demo notebook as shipped (defaults), Chromium driven by Playwright. For each
operation (draw, move, resize) the time runs from the canvas's pointer-release
handler (the moment the edit is committed and synced) to the `load` of the new
crop image in the region panel, both read from the page's performance.now().
The kernel-side time of the same edit (regional fit + full-scan
reconstruction + crop + PNG) is recorded next to it.

    python benchmarks/widget_latency.py [--reps 5] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "browser"))
sys.path.insert(0, str(REPO / "python"))

from lab import (  # noqa: E402
    DEMO_NOTEBOOK,
    chromium,
    drag_scan,
    jupyterlab,
    open_notebook,
    run_all_cells,
    run_json,
    screenshot,
    wait_status,
    widget_root,
)

from livessb.bench.report import git_commit  # noqa: E402

WAIT_PAINTED = """(root, [rid, timeout]) => new Promise((resolve, reject) => {
    const t0 = performance.now();
    const check = () => {
        const release = Number(root.dataset.lastRelease);
        const panel = root.querySelector(`[data-region-id="${rid}"]`);
        const img = panel && panel.querySelector('img');
        const painted = img ? Number(img.dataset.paintedAt || 'NaN') : NaN;
        if (painted > release && panel.dataset.status === 'done')
            return resolve({release, painted, generation: Number(img.dataset.generation)});
        if (panel && panel.dataset.status === 'error')
            return reject(new Error('region error: ' + panel.textContent));
        if (performance.now() - t0 > timeout) return reject(new Error('crop not painted'));
        requestAnimationFrame(check);
    };
    check();
})"""


def _summary(values: list[float]) -> dict[str, float]:
    s = sorted(values)
    return {"n": len(s), "first": values[0], "median": statistics.median(s), "min": s[0],
            "max": s[-1], "mean": statistics.fmean(s)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", type=Path,
                    default=REPO / "benchmarks" / "results" / "widget-latency-cpu.json")
    args = ap.parse_args(argv)

    import livessb.simulate

    ds = livessb.simulate.demo_dataset()
    shape = ds.scan_shape
    ops: dict[str, list[dict[str, Any]]] = {"draw": [], "move": [], "resize": []}
    t_setup = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, jupyterlab(Path(tmp) / "lab") as lab, \
            chromium() as browser:
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        open_notebook(page, lab, DEMO_NOTEBOOK.name)
        run_all_cells(page)
        root = widget_root(page)
        root.get_by_label("scan image").wait_for(timeout=120_000)
        wait_status(root, "done", timeout_ms=600_000)
        full_fit_s = time.perf_counter() - t_setup
        device = run_json(page, "w.session.device")

        def measure(op: str, start: tuple[float, float], end: tuple[float, float]) -> None:
            drag_scan(page, root, start, end, shape)
            r = root.evaluate(WAIT_PAINTED, ["r1", 300_000])
            kernel = run_json(page, "{'elapsed_s': w.region_results['r1']['elapsed_s'], "
                                    "'timings': w.session.regions['r1'].timings, "
                                    "'bounds': w.region_results['r1']['bounds']}")
            ops[op].append({"release_to_painted_ms": r["painted"] - r["release"],
                            "generation": r["generation"], "kernel_elapsed_s": kernel["elapsed_s"],
                            "bounds": kernel["bounds"], "session_timings": kernel["timings"]})
            print(f"{op:6s} {r['painted'] - r['release']:8.1f} ms  bounds {kernel['bounds']}",
                  flush=True)

        for i in range(args.reps):
            c0 = 6 + 8 * i
            a, b, c, d = 20, 76, c0, c0 + 26  # ~56×26 scan px, like the browser test
            measure("draw", (a + 0.2, c + 0.2), (b - 0.2, d - 0.2))
            measure("move", ((a + b) / 2, (c + d) / 2), ((a + b) / 2 - 6, (c + d) / 2 + 4))
            a, b, c, d = a - 6, b - 6, c + 4, d + 4
            measure("resize", (b, d), (b + 4, d - 2))
            if i == 0:
                screenshot(page, "latency-benchmark")
            root.get_by_label("delete region").click()
            page.wait_for_timeout(200)

    result = {
        "benchmark": "widget_latency",
        "what": "mouse release on the scan canvas -> new region crop painted (img load), "
                "in-page performance.now(); demo notebook as shipped (defaults: trials=200)",
        "dataset": "livessb.simulate.demo_dataset() 96x96 scan, 48x48 detector",
        "device": device,
        "browser": "Debian Chromium (headless) via Playwright; JupyterLab on localhost",
        "host": {"machine": platform.machine(), "cpus": os.cpu_count(),
                 "python": platform.python_version()},
        "commit": git_commit() or "unknown",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "full_field_fit_incl_startup_s": round(full_fit_s, 2),
        "summary_ms": {op: _summary([m["release_to_painted_ms"] for m in v])
                       for op, v in ops.items()},
        "kernel_summary_s": {op: _summary([m["kernel_elapsed_s"] for m in v])
                             for op, v in ops.items()},
        "runs": ops,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1))
    print(json.dumps(result["summary_ms"], indent=1))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

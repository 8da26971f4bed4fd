"""Drive a real JupyterLab on localhost with Playwright + Debian's Chromium.

Shared by tests/browser/test_demo_notebook.py and benchmarks/widget_latency.py.
No browser downloads: Chromium comes from `apt-get install chromium`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DEMO_NOTEBOOK = REPO / "notebooks" / "demo.ipynb"
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = os.environ.get("LIVESSB_CHROMIUM", "/usr/bin/chromium")
_LIVESSB = importlib.util.find_spec("livessb")  # the installed wheel under scripts/test.sh
assert _LIVESSB is not None and _LIVESSB.origin is not None, "livessb is not importable"
STATIC = Path(_LIVESSB.origin).parent / "static" / "widget.js"  # the bundle the kernel serves
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def stack_problem() -> str:
    """Why the browser tests cannot run here ("" when they can)."""
    if not Path(CHROMIUM).exists():
        return f"Chromium not found at {CHROMIUM} (apt-get install chromium)"
    if not STATIC.is_file():
        return "front end not built (npm run build, or scripts/build-frontend.sh)"
    return ""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Lab:
    url: str
    token: str
    root: Path
    proc: subprocess.Popen[bytes]
    log: Path

    def notebook_url(self, name: str) -> str:
        return f"{self.url}/lab/tree/{name}?token={self.token}&reset"


@contextlib.contextmanager
def jupyterlab(root: Path, notebook: Path = DEMO_NOTEBOOK, timeout: float = 90) -> Iterator[Lab]:
    """Start JupyterLab on a free localhost port serving ``root`` (with a copy of the notebook)."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(notebook, root / notebook.name)
    port, token = free_port(), secrets.token_hex(16)
    log = root.parent / f"jupyterlab-{port}.log"
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
           "--ServerApp.ip=127.0.0.1", f"--ServerApp.token={token}",
           f"--ServerApp.root_dir={root}", "--ServerApp.disable_check_xsrf=True",
           "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--ServerApp.open_browser=False"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    settings = root.parent / f"lab-settings-{port}"
    notif = settings / "@jupyterlab" / "apputils-extension"
    notif.mkdir(parents=True, exist_ok=True)
    (notif / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    env = dict(os.environ, JUPYTER_PLATFORM_DIRS="1", PYTHONUNBUFFERED="1",
               JUPYTERLAB_SETTINGS_DIR=str(settings),
               JUPYTERLAB_WORKSPACES_DIR=str(root.parent / f"lab-workspaces-{port}"))
    env.pop("ANYWIDGET_HMR", None)
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, cwd=root, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited early:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"JupyterLab did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield Lab(url, token, root, proc, log)
    finally:
        _stop(proc, token, url)


def _stop(proc: subprocess.Popen[bytes], token: str, url: str) -> None:
    if proc.poll() is None:
        with contextlib.suppress(OSError):
            req = urllib.request.Request(f"{url}/api/shutdown?token={token}", method="POST")
            urllib.request.urlopen(req, timeout=5)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)  # the server's own process group (kernels too)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@contextlib.contextmanager
def chromium(headless: bool = True) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                     headless=headless)
        try:
            yield browser
        finally:
            browser.close()


# ---------------------------------------------------------------- notebook helpers

def open_notebook(page: Any, lab: Lab, name: str, timeout_ms: float = 120_000) -> None:
    page.goto(lab.notebook_url(name), wait_until="domcontentloaded", timeout=timeout_ms)
    page.wait_for_function(
        """() => {
            const app = window.jupyterapp;
            const nb = app && app.shell.currentWidget;
            return !!(nb && nb.content && nb.sessionContext && nb.sessionContext.session &&
                      nb.sessionContext.session.kernel &&
                      nb.sessionContext.session.kernel.connectionStatus === 'connected' &&
                      nb.sessionContext.session.kernel.status === 'idle');
        }""", timeout=timeout_ms)


def run_all_cells(page: Any) -> None:
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")


def wait_kernel_idle(page: Any, timeout_ms: float = 120_000) -> None:
    page.wait_for_function(
        """() => {
            const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
            return k && k.status === 'idle';
        }""", timeout=timeout_ms)


def run_code(page: Any, code: str, timeout_ms: float = 300_000) -> str:
    """Append a code cell, run it, wait for it to finish; return its output text."""
    marker = f"__cell_done_{secrets.token_hex(4)}__"
    src = code.rstrip() + f"\nprint({marker!r})"
    index = page.evaluate(
        """(src) => {
            const nb = window.jupyterapp.shell.currentWidget.content;
            const n = nb.model.cells.length;
            nb.model.sharedModel.insertCell(n, {cell_type: 'code', source: src});
            nb.activeCellIndex = n;
            nb.deselectAll();
            return n;
        }""", src)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-cell')")
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    cell.locator(".jp-OutputArea-output", has_text=marker).wait_for(timeout=timeout_ms)
    return cell.locator(".jp-OutputArea").inner_text()


def run_json(page: Any, expr: str, timeout_ms: float = 300_000) -> Any:
    """Evaluate a Python expression in the kernel; JSON-decoded value."""
    out = run_code(page, f"import json as _j\nprint('__JSON__' + _j.dumps({expr}))", timeout_ms)
    line = next(ln for ln in out.splitlines() if ln.startswith("__JSON__"))
    return json.loads(line[len("__JSON__"):])


def restart_kernel(page: Any, timeout_ms: float = 120_000) -> None:
    page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart()")
    wait_kernel_idle(page, timeout_ms)


# ------------------------------------------------------------------ widget helpers

def widget_root(page: Any, nth: int = 0) -> Any:
    return page.locator(".livessb").nth(nth)


def wait_status(root: Any, status: str, timeout_ms: float = 300_000) -> None:
    root.locator(f"xpath=self::*[@data-status='{status}']").wait_for(timeout=timeout_ms)


def canvas_box(root: Any) -> dict[str, float]:
    box = root.get_by_label("scan image").bounding_box()
    assert box is not None
    return box


def scan_to_page(root: Any, r: float, c: float, shape: tuple[int, int]) -> tuple[float, float]:
    box = canvas_box(root)
    return (box["x"] + c * box["width"] / shape[1], box["y"] + r * box["height"] / shape[0])


def show_canvas(root: Any) -> None:
    """Scroll the scan canvas to the middle of the viewport (mouse events need it on screen)."""
    root.get_by_label("scan image").evaluate("el => el.scrollIntoView({block: 'center'})")


def drag_scan(page: Any, root: Any, start: tuple[float, float], end: tuple[float, float],
              shape: tuple[int, int], steps: int = 12) -> None:
    """Mouse drag between two scan positions (row, col), continuous scan pixels."""
    show_canvas(root)
    page.mouse.move(*scan_to_page(root, *start, shape))
    page.mouse.down()
    page.mouse.move(*scan_to_page(root, *end, shape), steps=steps)
    page.mouse.up()


def panel_state(root: Any, rid: str) -> dict[str, Any]:
    """Status, params (full precision from data-value), crop generation and bytes hash."""
    return root.evaluate(
        """async (root, rid) => {
            const panel = root.querySelector(`[data-region-id="${rid}"]`);
            if (!panel) return null;
            const img = panel.querySelector('img');
            const params = {};
            let loss = null;
            for (const dd of panel.querySelectorAll('.livessb-params [data-param]')) {
                if (dd.dataset.value === undefined) continue;
                if (dd.dataset.param === 'loss') loss = Number(dd.dataset.value);
                else params[dd.dataset.param] = Number(dd.dataset.value);
            }
            let sha = null, bytes = 0;
            if (img && img.src) {
                const buf = await (await fetch(img.src)).arrayBuffer();
                bytes = buf.byteLength;
                const d = new Uint8Array(await crypto.subtle.digest('SHA-256', buf));
                sha = Array.from(d, b => b.toString(16).padStart(2, '0')).join('');
            }
            return {status: panel.dataset.status, params, loss, src: img ? img.src : null,
                    generation: img && img.dataset.generation !== undefined
                        ? Number(img.dataset.generation) : null,
                    paintedAt: img && img.dataset.paintedAt ? Number(img.dataset.paintedAt) : null,
                    natural: img ? [img.naturalHeight, img.naturalWidth] : null,
                    visible: !!img && !img.hidden && img.naturalWidth > 0,
                    sha, bytes};
        }""", rid)


def wait_crop(root: Any, rid: str, generation: int, timeout_ms: float = 300_000) -> None:
    root.evaluate(
        """(root, [rid, gen, timeout]) => new Promise((resolve, reject) => {
            const t0 = performance.now();
            const check = () => {
                const panel = root.querySelector(`[data-region-id="${rid}"]`);
                const img = panel && panel.querySelector('img');
                if (panel && img && Number(img.dataset.generation) >= gen &&
                    panel.dataset.status !== 'fitting') return resolve(true);
                if (performance.now() - t0 > timeout)
                    return reject(new Error(`crop ${rid} gen ${gen} not painted`));
                setTimeout(check, 20);
            };
            check();
        })""", [rid, generation, timeout_ms])


def full_readout(root: Any) -> dict[str, Any]:
    return root.evaluate(
        """(root) => {
            const out = {};
            for (const s of root.querySelectorAll('.livessb-readout [data-param]'))
                out[s.dataset.param] = s.dataset.value;
            return out;
        }""")


def screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def label(root: Any, name: str) -> Any:
    """The element of ``root`` with this aria-label (tests select by meaning: SPEC §3)."""
    return root.get_by_label(name, exact=True)


def widget_shot(page: Any, root: Any, name: str) -> None:
    """The widget itself (``NAME-widget.png``) and the whole window (``NAME.png``)."""
    ARTIFACTS.mkdir(exist_ok=True)
    root.screenshot(path=str(ARTIFACTS / f"{name}-widget.png"))
    screenshot(page, name)


# ------------------------------------------------------------ preview frames

def preview_state(root: Any) -> dict[str, Any]:
    """Frames painted, params/seq of the frame on screen and the loss shown beside it."""
    return root.evaluate(
        """(root) => {
            const loss = root.querySelector('[aria-label="preview loss"]');
            return {frame: Number(root.dataset.previewFrame || 0),
                    seq: Number(root.dataset.previewSeq || -1),
                    params: JSON.parse(root.dataset.previewParams || '{}'),
                    loss: loss && loss.dataset.value ? Number(loss.dataset.value) : null};
        }""")


def wait_preview(root: Any, min_frame: int, params: dict[str, float] | None = None,
                 timeout_ms: float = 120_000) -> dict[str, Any]:
    """Wait until at least ``min_frame`` frames are painted and the frame on screen has
    ``params`` (those keys, within 1e-9); returns preview_state."""
    root.evaluate(
        """(root, [minFrame, want, timeout]) => new Promise((resolve, reject) => {
            const t0 = performance.now();
            const check = () => {
                const n = Number(root.dataset.previewFrame || 0);
                const p = JSON.parse(root.dataset.previewParams || '{}');
                const ok = n >= minFrame && Object.entries(want).every(
                    ([k, v]) => typeof p[k] === 'number' && Math.abs(p[k] - v) <= 1e-9);
                if (ok) return resolve(true);
                if (performance.now() - t0 > timeout)
                    return reject(new Error(`frame ${minFrame} with ${JSON.stringify(want)} not ` +
                                            `painted (have ${n}: ${root.dataset.previewParams})`));
                setTimeout(check, 20);
            };
            check();
        })""", [min_frame, params or {}, timeout_ms])
    return preview_state(root)


def canvas_pixels_digest(root: Any, name: str) -> str:
    """SHA-256 of a canvas's pixels (to tell a repaint)."""
    return root.evaluate(
        """async (root, name) => {
            const c = root.querySelector(`canvas[aria-label="${name}"]`);
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            const h = new Uint8Array(await crypto.subtle.digest('SHA-256', d));
            return Array.from(h, b => b.toString(16).padStart(2, '0')).join('');
        }""", name)


def fft_brightest(fft: Any, exclude_radius: float) -> tuple[int, int, int, int]:
    """(row, col, height, width) of the FFT canvas's brightest pixel outside a disc of
    ``exclude_radius`` pixels around zero frequency (what a user clicks as the peak)."""
    r, c, h, w = fft.evaluate(
        """(c, rad) => {
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let best = -1, at = 0;
            for (let i = 0; i < c.width * c.height; i++) {
                const r = Math.floor(i / c.width), k = i % c.width;
                if (Math.hypot(r - c.height / 2, k - c.width / 2) < rad) continue;
                const v = d[4 * i] + d[4 * i + 1] + d[4 * i + 2];
                if (v > best) { best = v; at = i; }
            }
            return [Math.floor(at / c.width), at % c.width, c.height, c.width];
        }""", exclude_radius)
    return int(r), int(c), int(h), int(w)


def click_fft_brightest(page: Any, root: Any, exclude_radius: float = 5) -> Any:
    """Open the FFT view and click its brightest lattice peak; returns the FFT canvas."""
    root.get_by_label("FFT view", exact=True).click()
    fft = root.get_by_label("FFT image", exact=True)
    fft.wait_for(state="visible")
    fft.scroll_into_view_if_needed()
    row, col, height, width = fft_brightest(fft, exclude_radius)
    box = fft.bounding_box()
    page.mouse.click(box["x"] + (col + 0.5) * box["width"] / width,
                     box["y"] + (row + 0.5) * box["height"] / height)
    return fft


@contextlib.contextmanager
def fitted_demo(root_dir: Path, tag: str, while_fitting: Callable[[Any], None] | None = None,
                init_script: str | None = None, viewport: tuple[int, int] = (1600, 1200),
                ) -> Iterator[tuple[Any, Lab, Any]]:
    """JupyterLab + Chromium with the demo notebook run and its full-field fit's frame
    painted: yields (page, lab, widget root). ``while_fitting(root)`` runs before the fit
    ends; ``init_script`` runs in the page before JupyterLab's own scripts (e.g. to time
    the widget's appearance); ``viewport``: the window's (width, height) in CSS px;
    the console and JupyterLab logs go to
    test-artifacts/``tag``-*.log, and a page error fails the fixture."""
    console: list[str] = []
    ARTIFACTS.mkdir(exist_ok=True)
    with jupyterlab(root_dir) as lab, chromium() as browser:
        page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
        if init_script is not None:
            page.add_init_script(init_script)
        try:
            open_notebook(page, lab, DEMO_NOTEBOOK.name)
            run_all_cells(page)
            root = widget_root(page)
            root.get_by_label("scan image", exact=True).wait_for(timeout=120_000)
            if while_fitting is not None:
                while_fitting(root)
            wait_status(root, "done", timeout_ms=600_000)
            wait_preview(root, 1, timeout_ms=120_000)  # the fit's frame
            yield page, lab, root
        finally:
            ARTIFACTS.mkdir(exist_ok=True)
            (ARTIFACTS / f"{tag}-console.log").write_text("\n".join(console))
            shutil.copyfile(lab.log, ARTIFACTS / f"{tag}-jupyterlab.log")
        assert not [c for c in console if c.startswith("pageerror")], console


def require_lab_stack() -> None:
    """Skip a module that drives JupyterLab + Chromium where those are missing (under
    LIVESSB_REQUIRE_ALL, as in CI, fail instead)."""
    from helpers import importable, require  # tests/ (on the path under pytest)

    require(importable("playwright") and importable("jupyterlab"),
            "pip install playwright jupyterlab (the dev extra)")
    require(not stack_problem(), stack_problem())

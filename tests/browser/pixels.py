"""What the widget DRAWS, read back from its canvases, and the truth to compare it with.

The browser tests check pixels, not synced state: the scan canvas's pixels
(``getImageData``) against the frame's values computed in the kernel by
``livessb.preview.render_preview`` (the same reconstruction, independent of the
browser), mapped through matplotlib's colormap tables (where the widget's tables
come from) under the contrast limits the test set. Also the layout helpers:
bounding boxes against the viewport and elements that overflow the widget.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np
from lab import run_code

LUT_SIZE = 256
# matplotlib's ends (scripts/gen_colormaps.py samples 256 colours over [0, 1])
GRAY_ENDS = ((0, 0, 0), (255, 255, 255))
VIRIDIS_ENDS = ((68, 1, 84), (253, 231, 37))

_CANVAS_RGB = """(c) => {
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    const rgb = new Uint8Array(c.width * c.height * 3);
    for (let i = 0, j = 0; i < d.length; i += 4, j += 3) {
        rgb[j] = d[i]; rgb[j + 1] = d[i + 1]; rgb[j + 2] = d[i + 2];
    }
    let s = '';
    for (let i = 0; i < rgb.length; i += 0x8000)
        s += String.fromCharCode.apply(null, rgb.subarray(i, i + 0x8000));
    return [c.height, c.width, btoa(s)];
}"""


def canvas_rgb(canvas: Any) -> np.ndarray:
    """The canvas's backing-store pixels, (height, width, 3) uint8."""
    h, w, data = canvas.evaluate(_CANVAS_RGB)
    return np.frombuffer(base64.b64decode(data), dtype=np.uint8).reshape(int(h), int(w), 3)


def colormap_table(name: str) -> np.ndarray:
    """(256, 3) uint8 of a colormap as the widget's tables hold it (matplotlib)."""
    import matplotlib

    cmap = matplotlib.colormaps[name]
    return np.round(cmap(np.linspace(0.0, 1.0, LUT_SIZE))[:, :3] * 255).astype(np.uint8)


def lut_index(values: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """The colormap entry of each value under contrast [lo, hi] (clamped)."""
    t = np.floor((values - lo) / (hi - lo) * LUT_SIZE)
    return np.clip(t, 0, LUT_SIZE - 1).astype(np.int64)


def frame_truth(page: Any, lab_root: Path, params: dict[str, float], name: str,
                view: str = "phase") -> np.ndarray:
    """The full-field frame of ``params`` as the kernel renders it (rad for the phase),
    saved by the kernel into the lab's folder and loaded here."""
    run_code(page, "import numpy as _np\n"
                   "from livessb.preview import render_preview as _render\n"
                   f"_np.save({name + '.npy'!r}, _render(w.session, {json.dumps(params)}, "
                   f"None, {view!r}, w.max_frame_px).image)")
    return np.asarray(np.load(lab_root / f"{name}.npy"), dtype=np.float64)


def at_frame_pixels(rgb: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """The canvas pixel at the centre of each frame pixel (zoom 1: the frame fills the
    canvas, drawn without smoothing), (rows, cols, 3)."""
    h, w = rgb.shape[:2]
    r = np.floor((np.arange(rows) + 0.5) * h / rows).astype(np.int64)
    c = np.floor((np.arange(cols) + 0.5) * w / cols).astype(np.int64)
    return rgb[np.ix_(r, c)]


def index_error(drawn: np.ndarray, table: np.ndarray, want: np.ndarray,
                cyclic: bool = False) -> np.ndarray:
    """Per pixel: how many colormap entries away from ``want`` the drawn colour is
    (0: exactly the value's colour; else the nearest entry of ``table`` to it, whose
    neighbours may be the same colour). A cyclic map's two ends are one colour: its
    distances wrap around."""
    d = ((drawn[..., None, :].astype(np.int64) - table[None, None].astype(np.int64)) ** 2).sum(-1)
    off = np.abs(np.argmin(d, axis=-1) - want)
    off = np.minimum(off, LUT_SIZE - off) if cyclic else off
    return np.where((drawn == table[want]).all(-1), 0, off)


# ----------------------------------------------------------------------- layout

def box_in_viewport(box: Any, viewport: Any, bottom_px: float | None = None) -> bool:
    """A bounding box (Playwright's, None when not shown) wholly inside the viewport (a
    width/height mapping), above ``bottom_px`` when given."""
    if box is None:
        return False
    bottom = viewport["height"] if bottom_px is None else bottom_px
    return (box["x"] >= 0 and box["y"] >= 0 and box["x"] + box["width"] <= viewport["width"]
            and box["y"] + box["height"] <= bottom)


OVERFLOW = """(root) => {
    const r = root.getBoundingClientRect();
    const out = [];
    for (const e of root.querySelectorAll('*')) {
        const b = e.getBoundingClientRect();
        if (b.width === 0 || b.height === 0) continue;
        if (b.right > r.right + 0.5 || b.left < r.left - 0.5)
            out.push(`${e.tagName.toLowerCase()}.${e.className} ` +
                     `"${e.getAttribute('aria-label') || ''}" ` +
                     `${Math.round(b.left)}..${Math.round(b.right)}`);
    }
    return {left: r.left, right: r.right, scrollWidth: root.scrollWidth,
            clientWidth: root.clientWidth, out};
}"""


def overflowing(root: Any) -> dict[str, Any]:
    """Elements of the widget that stick out of it left or right."""
    result: dict[str, Any] = root.evaluate(OVERFLOW)
    return result


OVERLAPS = """(root, sel) => {
    const els = [...root.querySelectorAll(sel)].filter(e => e.getClientRects().length);
    const out = [];
    for (let i = 0; i < els.length; i++) for (let j = i + 1; j < els.length; j++) {
        if (els[i].contains(els[j]) || els[j].contains(els[i])) continue;  // nested
        const na = els[i].className, nb = els[j].className;
        const a = els[i].getBoundingClientRect(), b = els[j].getBoundingClientRect();
        const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > 1 && h > 1) out.push(`${na} × ${nb}`);
    }
    return out;
}"""


def overlapping(root: Any, selector: str) -> list[str]:
    """Pairs of the elements matching ``selector`` (neither inside the other) whose boxes
    overlap."""
    result: list[str] = root.evaluate(OVERLAPS, selector)
    return result


def overlay_indices(before: np.ndarray, after: np.ndarray, centres: np.ndarray,
                    scan_shape: tuple[int, int], alpha: float, table: np.ndarray,
                    inset_px: int = 4) -> np.ndarray:
    """The overlay colormap entry each map tile was painted with, from the scan canvas
    before and after the overlay (zoom 1): ``after = alpha·tile + (1 − alpha)·before``
    solved for the tile colour over its cell's interior (``inset_px`` inside its edges
    and outline), then the nearest entry of ``table``. ``centres``: (tile rows, tile
    cols, 2) scan px; cells end midway between centres (overlay.ts cellEdges)."""
    h, w = after.shape[:2]

    def edges(c: np.ndarray, n: int) -> list[float]:
        return [0.0, *((c[:-1] + c[1:]) / 2 + 0.5), float(n)]

    er = edges(centres[:, 0, 0], scan_shape[0])
    ec = edges(centres[0, :, 1], scan_shape[1])
    sy, sx = h / scan_shape[0], w / scan_shape[1]
    out = np.zeros(centres.shape[:2], dtype=np.int64)
    for i in range(centres.shape[0]):
        for j in range(centres.shape[1]):
            y0, y1 = int(er[i] * sy) + inset_px, int(er[i + 1] * sy) - inset_px
            x0, x1 = int(ec[j] * sx) + inset_px, int(ec[j + 1] * sx) - inset_px
            cell = (after[y0:y1, x0:x1].astype(np.float64)
                    - (1 - alpha) * before[y0:y1, x0:x1].astype(np.float64)) / alpha
            rgb = cell.reshape(-1, 3).mean(0)
            out[i, j] = int(np.argmin(((table.astype(np.float64) - rgb) ** 2).sum(1)))
    return out

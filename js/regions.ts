// Pure region geometry: drawing, moving, resizing, clamping, hit testing and
// the scan <-> canvas coordinate mapping. No DOM, no model: unit tested.
//
// Rectangles are in scan pixels, stops exclusive (like the `regions` trait).
// Pointer positions are continuous scan coordinates (a pixel (r, c) covers
// [r, r+1) x [c, c+1)).

export interface Rect {
  row_start: number;
  row_stop: number;
  col_start: number;
  col_stop: number;
}

export interface Shape {
  rows: number;
  cols: number;
}

/** Continuous position in scan pixels. */
export interface ScanPoint {
  r: number;
  c: number;
}

/** Position in canvas (CSS) pixels. */
export interface CanvasPoint {
  x: number;
  y: number;
}

export type Handle = "n" | "s" | "e" | "w" | "ne" | "nw" | "se" | "sw";
export const HANDLES: readonly Handle[] = ["nw", "n", "ne", "e", "se", "s", "sw", "w"];

/** Scan -> canvas mapping: uniform scale plus offset (letterboxing). */
export interface Viewport {
  scale: number; // canvas px per scan px
  offsetX: number;
  offsetY: number;
}

const clampNum = (v: number, lo: number, hi: number): number => Math.min(Math.max(v, lo), hi);

/** Largest integer-free uniform scale so the scan fits in maxPx x maxPx. */
export function fitViewport(shape: Shape, maxPx: number): Viewport {
  const scale = maxPx / Math.max(shape.rows, shape.cols, 1);
  return { scale, offsetX: 0, offsetY: 0 };
}

export function canvasToScan(p: CanvasPoint, vp: Viewport): ScanPoint {
  return { r: (p.y - vp.offsetY) / vp.scale, c: (p.x - vp.offsetX) / vp.scale };
}

export function scanToCanvas(p: ScanPoint, vp: Viewport): CanvasPoint {
  return { x: p.c * vp.scale + vp.offsetX, y: p.r * vp.scale + vp.offsetY };
}

/** Canvas-pixel box {x, y, w, h} of a scan rectangle. */
export function rectToCanvas(rect: Rect, vp: Viewport): { x: number; y: number; w: number; h: number } {
  const a = scanToCanvas({ r: rect.row_start, c: rect.col_start }, vp);
  const b = scanToCanvas({ r: rect.row_stop, c: rect.col_stop }, vp);
  return { x: a.x, y: a.y, w: b.x - a.x, h: b.y - a.y };
}

export function rectHeight(r: Rect): number {
  return r.row_stop - r.row_start;
}

export function rectWidth(r: Rect): number {
  return r.col_stop - r.col_start;
}

export function sameRect(a: Rect, b: Rect): boolean {
  return (
    a.row_start === b.row_start &&
    a.row_stop === b.row_stop &&
    a.col_start === b.col_start &&
    a.col_stop === b.col_stop
  );
}

/** Integer bounds, inside the scan, at least 1 px each way. */
export function clampRect(rect: Rect, shape: Shape): Rect {
  const axis = (lo: number, hi: number, n: number): [number, number] => {
    let a = Math.round(Math.min(lo, hi));
    let b = Math.round(Math.max(lo, hi));
    a = clampNum(a, 0, Math.max(n - 1, 0));
    b = clampNum(b, a + 1, n);
    return [a, b];
  };
  const [row_start, row_stop] = axis(rect.row_start, rect.row_stop, shape.rows);
  const [col_start, col_stop] = axis(rect.col_start, rect.col_stop, shape.cols);
  return { row_start, row_stop, col_start, col_stop };
}

/**
 * Rectangle spanned by a drag from `a` to `b` (any direction). Covers every
 * pixel the drag touched: floor of the minimum, ceil of the maximum.
 */
export function rectFromDrag(a: ScanPoint, b: ScanPoint, shape: Shape): Rect {
  const r0 = Math.floor(Math.min(a.r, b.r));
  const r1 = Math.ceil(Math.max(a.r, b.r));
  const c0 = Math.floor(Math.min(a.c, b.c));
  const c1 = Math.ceil(Math.max(a.c, b.c));
  return clampRect(
    { row_start: r0, row_stop: Math.max(r1, r0 + 1), col_start: c0, col_stop: Math.max(c1, c0 + 1) },
    shape,
  );
}

/** Translate by (dr, dc) scan px (rounded), keeping the size, clamped into the scan. */
export function moveRect(rect: Rect, dr: number, dc: number, shape: Shape): Rect {
  const h = Math.min(rectHeight(rect), shape.rows);
  const w = Math.min(rectWidth(rect), shape.cols);
  const r0 = clampNum(rect.row_start + Math.round(dr), 0, shape.rows - h);
  const c0 = clampNum(rect.col_start + Math.round(dc), 0, shape.cols - w);
  return { row_start: r0, row_stop: r0 + h, col_start: c0, col_stop: c0 + w };
}

/**
 * Drag one handle to `p`: the edges the handle owns follow the pointer
 * (rounded to the pixel grid), the opposite edges stay. An edge never crosses
 * its opposite edge (min size 1 px) and never leaves the scan.
 */
export function resizeRect(rect: Rect, handle: Handle, p: ScanPoint, shape: Shape): Rect {
  let { row_start, row_stop, col_start, col_stop } = rect;
  const r = Math.round(p.r);
  const c = Math.round(p.c);
  if (handle.includes("n")) row_start = clampNum(r, 0, row_stop - 1);
  if (handle.includes("s")) row_stop = clampNum(r, row_start + 1, shape.rows);
  if (handle.includes("w")) col_start = clampNum(c, 0, col_stop - 1);
  if (handle.includes("e")) col_stop = clampNum(c, col_start + 1, shape.cols);
  return { row_start, row_stop, col_start, col_stop };
}

/** Handle position in scan coordinates. */
export function handlePoint(rect: Rect, handle: Handle): ScanPoint {
  const rm = (rect.row_start + rect.row_stop) / 2;
  const cm = (rect.col_start + rect.col_stop) / 2;
  const r = handle.includes("n") ? rect.row_start : handle.includes("s") ? rect.row_stop : rm;
  const c = handle.includes("w") ? rect.col_start : handle.includes("e") ? rect.col_stop : cm;
  return { r, c };
}

export type Hit<T extends Rect> =
  | { kind: "handle"; region: T; handle: Handle }
  | { kind: "inside"; region: T };

/**
 * What the pointer is on. Handles win over interiors (of any region), and
 * among regions the topmost (last drawn = last in the list) wins.
 * `tolerance` is the handle grab radius in scan px.
 */
export function hitTest<T extends Rect>(regions: readonly T[], p: ScanPoint, tolerance: number): Hit<T> | null {
  for (let i = regions.length - 1; i >= 0; i--) {
    const region = regions[i];
    for (const handle of HANDLES) {
      const h = handlePoint(region, handle);
      if (Math.abs(h.r - p.r) <= tolerance && Math.abs(h.c - p.c) <= tolerance) {
        return { kind: "handle", region, handle };
      }
    }
  }
  for (let i = regions.length - 1; i >= 0; i--) {
    const region = regions[i];
    if (p.r >= region.row_start && p.r < region.row_stop && p.c >= region.col_start && p.c < region.col_stop) {
      return { kind: "inside", region };
    }
  }
  return null;
}

/** CSS cursor for a hit. */
export function cursorFor(hit: Hit<Rect> | null): string {
  if (hit === null) return "crosshair";
  if (hit.kind === "inside") return "move";
  const map: Record<Handle, string> = {
    n: "ns-resize", s: "ns-resize", e: "ew-resize", w: "ew-resize",
    ne: "nesw-resize", sw: "nesw-resize", nw: "nwse-resize", se: "nwse-resize",
  };
  return map[hit.handle];
}

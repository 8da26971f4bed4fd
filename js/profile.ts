// Line profile maths: the values of an image sampled along a line (bilinear),
// the line's length in Å from the pixel sampling of each axis, and the plot's
// polyline. Points are continuous pixel coordinates (pixel (i, j) covers
// [i, i+1) × [j, j+1), its value sits at its centre), as ScanPoint in regions.ts.
import type { ScanPoint, Shape } from "./regions";

export interface Image2D {
  values: ArrayLike<number>; // row-major
  rows: number;
  cols: number;
}

/** Bilinear value at a continuous point (clamped to the outermost pixel centres). */
export function bilinear(img: Image2D, p: ScanPoint): number {
  const y = Math.min(Math.max(p.r - 0.5, 0), img.rows - 1);
  const x = Math.min(Math.max(p.c - 0.5, 0), img.cols - 1);
  const r0 = Math.min(Math.floor(y), Math.max(img.rows - 2, 0));
  const c0 = Math.min(Math.floor(x), Math.max(img.cols - 2, 0));
  const r1 = Math.min(r0 + 1, img.rows - 1);
  const c1 = Math.min(c0 + 1, img.cols - 1);
  const fy = y - r0;
  const fx = x - c0;
  const v = (r: number, c: number) => img.values[r * img.cols + c];
  const top = v(r0, c0) * (1 - fx) + v(r0, c1) * fx;
  const bottom = v(r1, c0) * (1 - fx) + v(r1, c1) * fx;
  return top * (1 - fy) + bottom * fy;
}

/**
 * `n` values equally spaced from `a` to `b` (both ends included). By default
 * about one sample per pixel of length (at least 2), so the plot shows what
 * the image resolves and no more.
 */
export function sampleLine(img: Image2D, a: ScanPoint, b: ScanPoint, n?: number): Float64Array {
  const count = Math.max(2, Math.round(n ?? Math.ceil(Math.hypot(b.r - a.r, b.c - a.c)) + 1));
  const out = new Float64Array(count);
  for (let i = 0; i < count; i++) {
    const t = i / (count - 1);
    out[i] = bilinear(img, { r: a.r + t * (b.r - a.r), c: a.c + t * (b.c - a.c) });
  }
  return out;
}

/** Length in Å of a line in pixels, from Å per pixel [row, col] (anisotropic sampling allowed). */
export function lineLengthA(a: ScanPoint, b: ScanPoint, samplingA: readonly [number, number]): number {
  return Math.hypot((b.r - a.r) * samplingA[0], (b.c - a.c) * samplingA[1]);
}

/** The same continuous point in an image of another shape covering the same field (scan px → frame px). */
export function rescalePoint(p: ScanPoint, from: Shape, to: Shape): ScanPoint {
  return { r: (p.r * to.rows) / from.rows, c: (p.c * to.cols) / from.cols };
}

/** `12.3 Å`: three significant figures from 1 Å up, two decimals below. */
export function lengthText(lengthA: number): string {
  return `${lengthA.toFixed(lengthA >= 100 ? 0 : lengthA >= 10 ? 1 : 2)} Å`;
}

export interface PlotLine {
  points: { x: number; y: number }[]; // box px: x right, y down
  lo: number; // value at the bottom of the box
  hi: number; // value at the top
}

/** Polyline of `values` across a w × h box (first value at x = 0, the maximum at y = 0). */
export function plotLine(values: ArrayLike<number>, w: number, h: number): PlotLine {
  let lo = Infinity;
  let hi = -Infinity;
  for (let i = 0; i < values.length; i++) {
    lo = Math.min(lo, values[i]);
    hi = Math.max(hi, values[i]);
  }
  if (!(hi > lo)) [lo, hi] = Number.isFinite(lo) ? [lo - 0.5, lo + 0.5] : [0, 1]; // a flat line in the middle
  const n = values.length;
  const points = Array.from({ length: n }, (_, i) => ({
    x: n > 1 ? (i / (n - 1)) * w : 0,
    y: ((hi - values[i]) / (hi - lo)) * h,
  }));
  return { points, lo, hi };
}

// The diffraction panel's pure logic (diffractionview.ts is its DOM): the log scale a
// pattern is painted with, where the BF disk, its centre and the repaired pixels fall on
// the canvas, the scan pixel under the pointer, the BF-pixel subset's radius, the
// descan field's arrows and the panel's texts. Detector coordinates: pixel i covers
// [i, i + 1), its centre i + 0.5; a disk centre at index c is at c + 0.5.
import { CODE_MAX } from "./frame";
import type { ScanPoint } from "./regions";

/** The log scale spans this many decades below the pattern's maximum. */
export const LOG_DECADES = 3;
const LOG_SCALE = 10 ** LOG_DECADES;
const RADIUS_STEP_PX = 0.01; // widget/patterns.py RADIUS_STEP_PX

let levels: Uint8Array | null = null;

/** Grey level (0–255) of each uint16 code: log(1 + s·t)/log(1 + s), t = code/65535, so a
 * pattern's minimum is black, its maximum white, 1/100 of the maximum (a dark field)
 * about a third and 1/1000 a tenth: the disk and the faint scattering outside it both
 * visible. */
export function logLevel(code: number): number {
  const t = Math.min(Math.max(code, 0), CODE_MAX) / CODE_MAX;
  return Math.round((255 * Math.log1p(LOG_SCALE * t)) / Math.log1p(LOG_SCALE));
}

function levelTable(): Uint8Array {
  if (levels === null) {
    levels = new Uint8Array(CODE_MAX + 1);
    for (let c = 0; c <= CODE_MAX; c++) levels[c] = logLevel(c);
  }
  return levels;
}

/** Opaque grey RGBA pixels of a pattern's codes on the log scale. */
export function paintPattern(codes: Uint16Array, out?: Uint8ClampedArray): Uint8ClampedArray {
  const table = levelTable();
  const rgba = out && out.length === 4 * codes.length ? out : new Uint8ClampedArray(4 * codes.length);
  for (let i = 0; i < codes.length; i++) {
    const g = table[codes[i]];
    rgba[4 * i] = g;
    rgba[4 * i + 1] = g;
    rgba[4 * i + 2] = g;
    rgba[4 * i + 3] = 255;
  }
  return rgba;
}

export interface Cell {
  row: number;
  col: number;
}

/** The scan pixel (row, col) holding a continuous scan point, null outside the scan. */
export function scanPixelAt(p: ScanPoint, shape: { rows: number; cols: number }): Cell | null {
  const row = Math.floor(p.r);
  const col = Math.floor(p.c);
  if (!(row >= 0 && row < shape.rows && col >= 0 && col < shape.cols)) return null;
  return { row, col };
}

/** Canvas px per detector px of a pattern binned by `bin` painted `scale` canvas px per
 * pattern px. */
export function detectorScale(bin: number, scale: number): number {
  return scale / Math.max(1, bin);
}

export interface Circle {
  x: number;
  y: number;
  r: number;
}

/** A disk (centre in detector index coordinates, radius in detector px) on the canvas. */
export function diskOnCanvas(centerRow: number, centerCol: number, radiusPx: number, bin: number, scale: number): Circle {
  const s = detectorScale(bin, scale);
  return { x: (centerCol + 0.5) * s, y: (centerRow + 0.5) * s, r: radiusPx * s };
}

export interface Box {
  x: number;
  y: number;
  w: number;
  h: number;
}

/** The mark of detector pixel (row, col): its own square, at least `minPx` canvas px
 * (centred on it), so a repaired pixel stays visible in a binned pattern. */
export function pixelMark(row: number, col: number, bin: number, scale: number, minPx = 5): Box {
  const s = detectorScale(bin, scale);
  const size = Math.max(s, minPx);
  return { x: (col + 0.5) * s - size / 2, y: (row + 0.5) * s - size / 2, w: size, h: size };
}

/** Distance (detector px) of the farthest of the `n` BF pixels nearest the centre, from
 * the ascending uint16 distances in 0.01 px steps (``diffraction_info.bf_radii``). */
export function subsetRadiusPx(radii: Uint16Array, n: number): number | null {
  if (radii.length === 0 || !(n >= 1)) return null;
  return radii[Math.min(Math.round(n), radii.length) - 1] * RADIUS_STEP_PX;
}

/** ascending uint16 distances from little-endian bytes. */
export function decodeRadii(bytes: Uint8Array | null): Uint16Array {
  if (!bytes || bytes.byteLength < 2) return new Uint16Array(0);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Uint16Array(Math.floor(bytes.byteLength / 2));
  for (let i = 0; i < out.length; i++) out[i] = view.getUint16(2 * i, true);
  return out;
}

/** The BF-pixel slider's text: how many of all, and the radius they reach. */
export function bfPixelsText(n: number, total: number, radiusPx: number | null): string {
  const reach = radiusPx === null ? "" : ` (r ≤ ${radiusPx.toFixed(1)} px)`;
  return n >= total ? `all ${total} BF pixels${reach}` : `${n} of ${total} BF pixels${reach}`;
}

/** The read-out of a pattern: scan position in px and Å, its total counts. */
export function positionText(cell: Cell | null, stepA: readonly number[] | null, total: number | null, scanShape: { rows: number; cols: number }): string {
  const counts = total === null || !Number.isFinite(total) ? "" : ` · ${formatCounts(total)} counts`;
  if (cell === null) return `mean of ${scanShape.rows}×${scanShape.cols} patterns${counts}`;
  const where = stepA && stepA.length === 2 ? ` (${(cell.row * stepA[0]).toFixed(1)}, ${(cell.col * stepA[1]).toFixed(1)} Å)` : "";
  return `scan row ${cell.row}, col ${cell.col}${where}${counts}`;
}

function formatCounts(v: number): string {
  return Math.abs(v) >= 1e5 ? v.toExponential(3) : v.toFixed(Math.abs(v) >= 100 ? 0 : 2);
}

export interface DescanRecord {
  model: string;
  span_px: number;
  residual_rms_px: number;
  significant: boolean;
  applied: boolean;
  rows_px: number[];
  cols_px: number[];
  shift_px: number[][];
}

/** A descan record from the trait (null when absent or malformed). */
export function parseDescan(raw: unknown): DescanRecord | null {
  if (!raw || typeof raw !== "object") return null;
  const o = raw as Partial<DescanRecord>;
  if (!Array.isArray(o.rows_px) || !Array.isArray(o.cols_px) || !Array.isArray(o.shift_px)) return null;
  if (o.shift_px.length !== o.rows_px.length * o.cols_px.length) return null;
  return {
    model: String(o.model ?? ""), span_px: Number(o.span_px), residual_rms_px: Number(o.residual_rms_px),
    significant: !!o.significant, applied: !!o.applied, rows_px: o.rows_px.map(Number), cols_px: o.cols_px.map(Number),
    shift_px: o.shift_px.map((s) => [Number(s[0]), Number(s[1])]),
  };
}

export interface Arrow {
  x0: number;
  y0: number;
  x1: number;
  y1: number;
}

/** Arrows of the descan field on a `width`×`height` canvas of the scan: one per grid
 * point at its scan position, the longest drawn 0.9 of the grid spacing (a field that
 * does not vary: dots). Returns the arrows and detector px per canvas px of arrow. */
export function descanArrows(d: DescanRecord, scanShape: { rows: number; cols: number }, width: number, height: number): { arrows: Arrow[]; pxPerCanvasPx: number } {
  const sx = width / scanShape.cols;
  const sy = height / scanShape.rows;
  const spacing = Math.min(width / Math.max(d.cols_px.length, 1), height / Math.max(d.rows_px.length, 1));
  const longest = Math.max(0, ...d.shift_px.map(([a, b]) => Math.hypot(a, b)));
  const k = longest > 0 ? (0.9 * spacing) / longest : 0;
  const arrows: Arrow[] = [];
  d.rows_px.forEach((r, i) =>
    d.cols_px.forEach((c, j) => {
      const [dr, dc] = d.shift_px[i * d.cols_px.length + j];
      const x0 = (c + 0.5) * sx;
      const y0 = (r + 0.5) * sy;
      arrows.push({ x0, y0, x1: x0 + k * dc, y1: y0 + k * dr });
    }),
  );
  return { arrows, pxPerCanvasPx: k > 0 ? 1 / k : 0 };
}

/** What the panel says of the descan measurement. */
export function descanText(d: DescanRecord | null): string {
  if (d === null) return "descan: not measured";
  const span = `${d.model} fit, span ${d.span_px.toFixed(2)} px, residual ${d.residual_rms_px.toFixed(2)} px`;
  return d.applied ? `descan: ${span}, corrected` : `descan: ${span}, below threshold (not corrected)`;
}

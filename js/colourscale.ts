// The colour bar's content: the text of its two ends (the contrast limits, in the
// image's unit) and the gradient pixels of the colormap for a bar standing beside
// the image: one pixel wide, the highest value at the top.
import { LUT_SIZE } from "./colormaps";

/** A limit as text: counts in whole numbers, small values with three significant digits. */
export function formatLimit(v: number): string {
  if (!Number.isFinite(v)) return "–";
  const a = Math.abs(v);
  if (a === 0) return "0";
  if (a >= 1e6 || a < 1e-3) return v.toExponential(2);
  if (a >= 1000) return v.toFixed(0);
  return Number(v.toPrecision(3)).toString();
}

/** The two ends' text: `lo unit`, `hi unit`. */
export function endLabels(limits: readonly [number, number], unit: string): [string, string] {
  const u = unit ? ` ${unit}` : "";
  return [`${formatLimit(limits[0])}${u}`, `${formatLimit(limits[1])}${u}`];
}

/** RGBA of a 1 × LUT_SIZE gradient: the LUT from its last entry (top row) to its first
 * (bottom row), alpha opaque. */
export function gradientPixels(table: Uint8ClampedArray): Uint8ClampedArray {
  if (table.length !== 4 * LUT_SIZE) throw new Error(`colormap table has ${table.length / 4} entries, expected ${LUT_SIZE}`);
  const out = new Uint8ClampedArray(table.length);
  for (let i = 0; i < LUT_SIZE; i++) {
    const from = 4 * (LUT_SIZE - 1 - i);
    out.set(table.subarray(from, from + 3), 4 * i);
    out[4 * i + 3] = 255;
  }
  return out;
}

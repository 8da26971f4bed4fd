// The colour bar's content: the text of its two ends (the contrast limits, in the
// image's unit) and the gradient pixels of the colormap, lowest value on the left.
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

/** RGBA of a LUT_SIZE × 1 gradient (the LUT itself, alpha opaque). */
export function gradientPixels(table: Uint8ClampedArray): Uint8ClampedArray {
  if (table.length !== 4 * LUT_SIZE) throw new Error(`colormap table has ${table.length / 4} entries, expected ${LUT_SIZE}`);
  const out = new Uint8ClampedArray(table);
  for (let i = 3; i < out.length; i += 4) out[i] = 255;
  return out;
}

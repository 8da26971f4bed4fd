// Colormap lookup tables (256 RGBA entries each) for painting frames in the
// browser without a round trip. Tables come from matplotlib (colormap-data.ts).
import { COLORMAP_HEX } from "./colormap-data";

export type ColormapName = "gray" | "viridis" | "inferno" | "magma" | "twilight";
export const COLORMAPS: readonly ColormapName[] = ["gray", "viridis", "inferno", "magma", "twilight"];
/** Maps whose ends meet (for angles such as the phase). */
export const CYCLIC: ReadonlySet<ColormapName> = new Set<ColormapName>(["twilight"]);

export const LUT_SIZE = 256;

const cache = new Map<ColormapName, Uint8ClampedArray>();

/** Parse 256 × "rrggbb" into RGBA bytes (alpha 255). */
export function parseLut(hex: string): Uint8ClampedArray {
  if (hex.length !== LUT_SIZE * 6) throw new Error(`colormap table has ${hex.length / 6} entries, expected ${LUT_SIZE}`);
  const lut = new Uint8ClampedArray(LUT_SIZE * 4);
  for (let i = 0; i < LUT_SIZE; i++) {
    lut[4 * i] = parseInt(hex.slice(6 * i, 6 * i + 2), 16);
    lut[4 * i + 1] = parseInt(hex.slice(6 * i + 2, 6 * i + 4), 16);
    lut[4 * i + 2] = parseInt(hex.slice(6 * i + 4, 6 * i + 6), 16);
    lut[4 * i + 3] = 255;
  }
  return lut;
}

export function isColormap(x: unknown): x is ColormapName {
  return typeof x === "string" && (COLORMAPS as readonly string[]).includes(x);
}

/** RGBA table of a colormap (parsed once). */
export function lut(name: ColormapName): Uint8ClampedArray {
  let table = cache.get(name);
  if (!table) {
    table = parseLut(COLORMAP_HEX[name]);
    cache.set(name, table);
  }
  return table;
}

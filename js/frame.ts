// A preview frame as it travels: h·w little-endian uint16 codes, value =
// lo + (hi - lo) · code / 65535. Decoding, code → value, and painting the
// codes through a colormap LUT with contrast limits (in physical units).
import { LUT_SIZE } from "./colormaps";

export const CODE_MAX = 65535;
const LITTLE_ENDIAN_HOST = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

export interface Frame {
  codes: Uint16Array;
  rows: number;
  cols: number;
  lo: number; // value of code 0
  hi: number; // value of code 65535
}

/** Read h·w little-endian uint16 from bytes (any alignment, any host endianness). */
export function decodeCodes(bytes: Uint8Array, rows: number, cols: number): Uint16Array {
  const n = rows * cols;
  if (!Number.isInteger(n) || n <= 0) throw new Error(`frame shape ${rows}×${cols} is empty`);
  if (bytes.byteLength !== 2 * n) {
    throw new Error(`frame buffer has ${bytes.byteLength} bytes, expected ${2 * n} for ${rows}×${cols} uint16`);
  }
  if (LITTLE_ENDIAN_HOST && bytes.byteOffset % 2 === 0) {
    return new Uint16Array(bytes.buffer, bytes.byteOffset, n).slice(); // a copy: the buffer is the comm's
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const codes = new Uint16Array(n);
  for (let i = 0; i < n; i++) codes[i] = view.getUint16(2 * i, true);
  return codes;
}

export function codeToValue(frame: Frame, code: number): number {
  return frame.lo + ((frame.hi - frame.lo) * code) / CODE_MAX;
}

/** Physical values of all pixels (for the FFT). */
export function frameValues(frame: Frame): Float64Array {
  const out = new Float64Array(frame.codes.length);
  const span = (frame.hi - frame.lo) / CODE_MAX;
  for (let i = 0; i < out.length; i++) out[i] = frame.lo + span * frame.codes[i];
  return out;
}

/** LUT index of a value under contrast [cmin, cmax] (clamped; cmax ≤ cmin paints a step). */
export function lutIndex(value: number, cmin: number, cmax: number): number {
  if (!(cmax > cmin)) return value >= cmin ? LUT_SIZE - 1 : 0;
  const t = (value - cmin) / (cmax - cmin);
  return Math.min(LUT_SIZE - 1, Math.max(0, Math.floor(t * LUT_SIZE)));
}

/**
 * RGBA pixels of the frame through `lut` with contrast [cmin, cmax]. Each of
 * the 65536 codes is mapped to a LUT index once, then pixels are a lookup.
 */
export function paintFrame(
  frame: Frame, table: Uint8ClampedArray, cmin: number, cmax: number, out?: Uint8ClampedArray,
): Uint8ClampedArray {
  const n = frame.codes.length;
  const rgba = out && out.length === 4 * n ? out : new Uint8ClampedArray(4 * n);
  const index = new Uint8Array(CODE_MAX + 1);
  if (cmax > cmin) {
    // lutIndex(codeToValue(code)) inlined: the same arithmetic, without 65536 calls
    const span = frame.hi - frame.lo;
    const width = cmax - cmin;
    for (let code = 0; code <= CODE_MAX; code++) {
      const t = Math.floor(((frame.lo + (span * code) / CODE_MAX - cmin) / width) * LUT_SIZE);
      index[code] = t < 0 ? 0 : t > LUT_SIZE - 1 ? LUT_SIZE - 1 : t;
    }
  } else {
    for (let code = 0; code <= CODE_MAX; code++) index[code] = lutIndex(codeToValue(frame, code), cmin, cmax);
  }
  for (let i = 0; i < n; i++) {
    const k = 4 * index[frame.codes[i]];
    const o = 4 * i;
    rgba[o] = table[k];
    rgba[o + 1] = table[k + 1];
    rgba[o + 2] = table[k + 2];
    rgba[o + 3] = 255;
  }
  return rgba;
}

// Contrast from the frame's codes: exact percentiles (a counting pass over the
// 65536 codes) for auto contrast, and the histogram drawn under the limits.
import { CODE_MAX, codeToValue, type Frame } from "./frame";

/** Counts of each of the 65536 codes. */
export function codeCounts(codes: Uint16Array): Uint32Array {
  const counts = new Uint32Array(CODE_MAX + 1);
  for (let i = 0; i < codes.length; i++) counts[codes[i]]++;
  return counts;
}

/**
 * The q-th percentiles (0..100) of the frame's values, by the "linear" rule of
 * numpy.percentile (interpolating between order statistics k and k+1).
 */
export function percentiles(frame: Frame, qs: readonly number[], counts = codeCounts(frame.codes)): number[] {
  const n = frame.codes.length;
  if (n === 0) return qs.map(() => NaN);
  const positions = qs.map((q) => (Math.min(Math.max(q, 0), 100) / 100) * (n - 1));
  // the order statistics needed (k and k+1 of each position), found in one cumulative walk
  const wanted = [...new Set(positions.flatMap((pos) => [Math.floor(pos), Math.min(Math.floor(pos) + 1, n - 1)]))].sort((a, b) => a - b);
  const stat = new Map<number, number>();
  let seen = 0;
  let next = 0;
  for (let code = 0; code <= CODE_MAX && next < wanted.length; code++) {
    seen += counts[code];
    while (next < wanted.length && seen > wanted[next]) stat.set(wanted[next++], codeToValue(frame, code));
  }
  return positions.map((pos) => {
    const k = Math.floor(pos);
    const a = stat.get(k)!;
    if (k + 1 >= n || pos === k) return a;
    return a + (pos - k) * (stat.get(k + 1)! - a);
  });
}

/** Auto contrast: the 1st and 99th percentiles (a flat frame gets a unit window). */
export function autoContrast(frame: Frame, counts = codeCounts(frame.codes)): [number, number] {
  const [lo, hi] = percentiles(frame, [1, 99], counts);
  if (hi > lo) return [lo, hi];
  return [lo - 0.5, lo + 0.5];
}

export interface Histogram {
  counts: Uint32Array;
  lo: number; // value at the left edge of bin 0
  hi: number; // value at the right edge of the last bin
}

/** `bins` equal bins over the frame's value range [lo, hi]. */
export function histogram(frame: Frame, bins: number, counts = codeCounts(frame.codes)): Histogram {
  const out = new Uint32Array(bins);
  const perCode = bins / (CODE_MAX + 1);
  for (let code = 0; code <= CODE_MAX; code++) {
    if (counts[code] !== 0) out[Math.min(bins - 1, Math.floor(code * perCode))] += counts[code];
  }
  return { counts: out, lo: frame.lo, hi: frame.hi };
}

/** Value at a fraction 0..1 across the histogram (for dragging limits on it). */
export function histogramValue(h: Histogram, fraction: number): number {
  return h.lo + Math.min(Math.max(fraction, 0), 1) * (h.hi - h.lo);
}

/** Fraction 0..1 across the histogram of a value (for drawing the limit markers). */
export function histogramFraction(h: Histogram, value: number): number {
  return h.hi > h.lo ? (value - h.lo) / (h.hi - h.lo) : 0;
}

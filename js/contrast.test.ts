import { describe, expect, it } from "vitest";
import { autoContrast, histogram, histogramFraction, histogramValue, percentiles } from "./contrast";
import type { Frame } from "./frame";

// numpy.percentile's default ("linear") rule, written independently on sorted values
function npPercentile(values: number[], q: number): number {
  const s = [...values].sort((a, b) => a - b);
  const pos = (q / 100) * (s.length - 1);
  const k = Math.floor(pos);
  return k + 1 < s.length ? s[k] + (pos - k) * (s[k + 1] - s[k]) : s[k];
}

function randomFrame(n: number, seed: number): Frame {
  let x = seed;
  const codes = new Uint16Array(n);
  for (let i = 0; i < n; i++) {
    x = (1103515245 * x + 12345) % 2147483648;
    codes[i] = Math.floor(((x / 2147483648) ** 2) * 65535); // skewed distribution
  }
  return { codes, rows: 1, cols: n, lo: -1.5, hi: 2.5 };
}

describe("percentiles", () => {
  it("match numpy's linear percentile on the decoded values", () => {
    const f = randomFrame(1001, 7);
    const values = Array.from(f.codes, (c) => f.lo + ((f.hi - f.lo) * c) / 65535);
    const got = percentiles(f, [0, 1, 25, 50, 99, 100]);
    [0, 1, 25, 50, 99, 100].forEach((q, i) => expect(got[i]).toBeCloseTo(npPercentile(values, q), 10));
  });
  it("auto contrast is the 1–99 % window and ignores outliers", () => {
    const codes = new Uint16Array(1000).fill(30000);
    for (let i = 0; i < 1000; i++) codes[i] = 20000 + i * 20; // ramp 20000..39980
    codes[0] = 0;
    codes[999] = 65535; // two outliers
    const f: Frame = { codes, rows: 10, cols: 100, lo: 0, hi: 65535 };
    const [lo, hi] = autoContrast(f);
    expect(lo).toBeGreaterThan(20000);
    expect(lo).toBeLessThan(20500);
    expect(hi).toBeLessThan(40000);
    expect(hi).toBeGreaterThan(39400);
  });
  it("a flat frame gets a non-empty window", () => {
    const f: Frame = { codes: new Uint16Array(50).fill(7), rows: 5, cols: 10, lo: 0, hi: 65535 };
    const [lo, hi] = autoContrast(f);
    expect(hi).toBeGreaterThan(lo);
  });
});

describe("histogram", () => {
  it("bins all pixels over the frame range", () => {
    const f: Frame = { codes: new Uint16Array([0, 1, 32767, 32768, 65535, 65535]), rows: 1, cols: 6, lo: 0, hi: 1 };
    const h = histogram(f, 4);
    expect(Array.from(h.counts)).toEqual([2, 1, 1, 2]);
    expect(h.counts.reduce((a, b) => a + b, 0)).toBe(6);
  });
  it("value <-> fraction across the histogram", () => {
    const h = { counts: new Uint32Array(4), lo: -2, hi: 2 };
    expect(histogramValue(h, 0.25)).toBe(-1);
    expect(histogramValue(h, 2)).toBe(2);
    expect(histogramFraction(h, 1)).toBe(0.75);
  });
});

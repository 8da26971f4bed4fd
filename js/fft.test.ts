import { describe, expect, it } from "vitest";
import { fft1d, fft2d, logDisplay, nextPow2, powerSpectrum } from "./fft";

// direct DFT, independently of the FFT
function dft(x: number[]): [number[], number[]] {
  const n = x.length;
  const re: number[] = [];
  const im: number[] = [];
  for (let k = 0; k < n; k++) {
    let a = 0;
    let b = 0;
    for (let t = 0; t < n; t++) {
      a += x[t] * Math.cos((-2 * Math.PI * k * t) / n);
      b += x[t] * Math.sin((-2 * Math.PI * k * t) / n);
    }
    re.push(a);
    im.push(b);
  }
  return [re, im];
}

describe("FFT", () => {
  it("1-D matches the direct DFT", () => {
    const x = [0.3, -1, 2, 5, 0, 0.25, -3, 1.5];
    const re = Float64Array.from(x);
    const im = new Float64Array(8);
    fft1d(re, im, 8);
    const [er, ei] = dft(x);
    for (let k = 0; k < 8; k++) {
      expect(re[k]).toBeCloseTo(er[k], 10);
      expect(im[k]).toBeCloseTo(ei[k], 10);
    }
    expect(() => fft1d(re, im, 6)).toThrow(/power of two/);
  });
  it("2-D of a plane wave is one bin", () => {
    const rows = 8;
    const cols = 16;
    const re = new Float64Array(rows * cols);
    const im = new Float64Array(rows * cols);
    for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) {
      const ph = 2 * Math.PI * ((2 * r) / rows + (3 * c) / cols);
      re[r * cols + c] = Math.cos(ph);
      im[r * cols + c] = Math.sin(ph);
    }
    fft2d(re, im, rows, cols);
    for (let i = 0; i < rows * cols; i++) {
      const mag = Math.hypot(re[i], im[i]);
      if (i === 2 * cols + 3) expect(mag).toBeCloseTo(rows * cols, 8);
      else expect(mag).toBeLessThan(1e-8);
    }
  });
  it("nextPow2", () => {
    expect([1, 2, 3, 96, 128, 129].map(nextPow2)).toEqual([1, 2, 4, 128, 128, 256]);
  });
  it("power spectrum is fftshifted: zero frequency in the middle, symmetric peaks", () => {
    const n = 64;
    const v = new Float64Array(n * n);
    for (let r = 0; r < n; r++) for (let c = 0; c < n; c++) v[r * n + c] = 5 + Math.cos((2 * Math.PI * 8 * c) / n);
    const s = powerSpectrum(v, n, 0, 0, n, n);
    expect(s.rows).toBe(64);
    let best = 0;
    for (let i = 1; i < s.power.length; i++) if (s.power[i] > s.power[best]) best = i;
    const br = Math.floor(best / n);
    const bc = best % n;
    expect(br).toBe(32);
    expect(Math.abs(bc - 32)).toBe(8);
    expect(s.power[32 * n + 32]).toBeLessThan(1e-20 * s.power[best]); // the (tapered) mean is removed
    const shown = logDisplay(s);
    expect(Math.max(...shown)).toBe(1);
  });
});

import { describe, expect, it } from "vitest";
import { dSpacing, dSpacingText, refinePeak, strongestBin } from "./dspacing";
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

describe("d-spacing from a simulated square lattice", () => {
  // a SrTiO3-like lattice (a = 3.905 Å) sampled at 0.3 Å per pixel, rotated by 17°
  const a = 3.905;
  const sampling: [number, number] = [0.3, 0.3];
  const rows = 150;
  const cols = 170; // not powers of two: padded to 256
  const th = (17 * Math.PI) / 180;
  const img = new Float64Array(rows * cols);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) {
    const y = r * sampling[0];
    const x = c * sampling[1];
    const u = x * Math.cos(th) + y * Math.sin(th);
    const w = -x * Math.sin(th) + y * Math.cos(th);
    img[r * cols + c] = Math.cos((2 * Math.PI * u) / a) + Math.cos((2 * Math.PI * w) / a) + 0.4 * Math.cos((2 * Math.PI * (u + w)) / a);
  }
  const s = powerSpectrum(img, cols, 0, 0, rows, cols);

  it("the strongest peak gives a within 0.2 %, a near click refines to it", () => {
    let best = 0;
    for (let i = 0; i < s.power.length; i++) if (s.power[i] > s.power[best]) best = i;
    const br = Math.floor(best / s.cols);
    const bc = best % s.cols;
    // click 2 bins off the peak
    const m = dSpacing(refinePeak(s, br + 2, bc - 1), s.rows, s.cols, sampling);
    expect(Math.abs(m.dA - a) / a).toBeLessThan(0.002);
    expect(dSpacingText(m)).toMatch(/^d = 3\.9\d\d Å$/);
  });
  it("the (1 1) peak gives a/√2 within 1 %", () => {
    // (1,1) of the rotated lattice: frequency (sin + cos, cos - sin)/a in (row, col)
    const fr = (Math.sin(th) + Math.cos(th)) / a;
    const fc = (Math.cos(th) - Math.sin(th)) / a;
    const row = s.rows / 2 + fr * s.rows * sampling[0];
    const col = s.cols / 2 + fc * s.cols * sampling[1];
    const m = dSpacing(refinePeak(s, row, col), s.rows, s.cols, sampling);
    expect(Math.abs(m.dA - a / Math.SQRT2) / (a / Math.SQRT2)).toBeLessThan(0.01);
  });
  it("strongestBin skips the low-frequency core and finds a first-order peak", () => {
    const at = strongestBin(s, 4)!;
    const m = dSpacing(refinePeak(s, at.row, at.col, 1), s.rows, s.cols, sampling);
    expect(Math.abs(m.dA - a) / a).toBeLessThan(0.002);
  });
  it("anisotropic sampling and the zero bin", () => {
    const m = dSpacing({ row: 64 + 10, col: 64 }, 128, 128, [0.5, 0.25]);
    expect(m.dA).toBeCloseTo((128 * 0.5) / 10, 10);
    expect(dSpacing({ row: 64, col: 64 }, 128, 128, [1, 1]).dA).toBe(Infinity);
  });
});

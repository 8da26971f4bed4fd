import { describe, expect, it } from "vitest";
import {
  bfPixelsText, decodeRadii, descanArrows, descanText, diskOnCanvas, logLevel, paintPattern, parseDescan, pixelMark,
  positionText, scanPixelAt, subsetRadiusPx, type DescanRecord,
} from "./diffraction";

describe("log scale", () => {
  it("maps the minimum to black, the maximum to white and is monotonic", () => {
    expect(logLevel(0)).toBe(0);
    expect(logLevel(65535)).toBe(255);
    let last = -1;
    for (let c = 0; c <= 65535; c += 97) {
      const g = logLevel(c);
      expect(g).toBeGreaterThanOrEqual(last);
      last = g;
    }
  });

  it("lifts the dark field: 1/100 of the maximum is a third of the way up", () => {
    // log(1 + 1000 t)/log(1001) at t = 1e-3: log 2 / log 1001 ≈ 0.100; at 1e-2: ≈ 0.347
    expect(logLevel(65.535)).toBe(Math.round((255 * Math.log(2)) / Math.log(1001)));
    expect(logLevel(655.35)).toBeGreaterThan(80);
    expect(logLevel(655.35)).toBeLessThan(95);
    expect(logLevel(32768)).toBe(Math.round((255 * Math.log(501)) / Math.log(1001))); // half: 0.9 of white
  });

  it("paints opaque grey pixels of the codes' levels and clamps codes", () => {
    const rgba = paintPattern(new Uint16Array([0, 65535, 655]));
    expect(Array.from(rgba.slice(0, 8))).toEqual([0, 0, 0, 255, 255, 255, 255, 255]);
    expect(rgba[8]).toBe(logLevel(655));
    expect(rgba[8]).toBe(rgba[9]);
    expect(rgba[9]).toBe(rgba[10]);
    expect(logLevel(-5)).toBe(0);
    expect(logLevel(70000)).toBe(255);
  });
});

describe("positions", () => {
  it("takes the scan pixel under the pointer, none outside the scan", () => {
    const shape = { rows: 96, cols: 80 };
    expect(scanPixelAt({ r: 0, c: 0 }, shape)).toEqual({ row: 0, col: 0 });
    expect(scanPixelAt({ r: 12.99, c: 40.01 }, shape)).toEqual({ row: 12, col: 40 });
    expect(scanPixelAt({ r: 95.999, c: 79.5 }, shape)).toEqual({ row: 95, col: 79 });
    expect(scanPixelAt({ r: 96, c: 3 }, shape)).toBeNull();
    expect(scanPixelAt({ r: -0.01, c: 3 }, shape)).toBeNull();
    expect(scanPixelAt({ r: 3, c: Number.NaN }, shape)).toBeNull();
  });

  it("reads out the position in px and Å and the counts", () => {
    expect(positionText({ row: 12, col: 40 }, [0.6, 0.5], 12345.6, { rows: 96, cols: 96 })).toBe(
      "scan row 12, col 40 (7.2, 20.0 Å) · 12346 counts");
    expect(positionText(null, null, 3.5, { rows: 96, cols: 80 })).toBe("mean of 96×80 patterns · 3.50 counts");
    expect(positionText({ row: 1, col: 2 }, null, 2.5e6, { rows: 4, cols: 4 })).toBe("scan row 1, col 2 · 2.500e+6 counts");
  });
});

describe("disk and pixel overlays", () => {
  it("puts a disk centre at its pixel's centre on the canvas, binned or not", () => {
    // pixel 10 covers [10, 11): centre 10.5; 5 canvas px per detector px
    expect(diskOnCanvas(10, 20, 8, 1, 5)).toEqual({ x: 102.5, y: 52.5, r: 40 });
    // 2× binned, 4 canvas px per pattern px: 2 per detector px
    expect(diskOnCanvas(10, 20, 8, 2, 4)).toEqual({ x: 41, y: 21, r: 16 });
  });

  it("marks a detector pixel with its own square, at least minPx wide", () => {
    expect(pixelMark(3, 4, 1, 10)).toEqual({ x: 40, y: 30, w: 10, h: 10 });
    const b = pixelMark(3, 4, 4, 2); // half a canvas px per detector px: a 5 px mark around it
    expect(b.w).toBe(5);
    expect(b.x + b.w / 2).toBeCloseTo(4.5 * 0.5);
    expect(b.y + b.h / 2).toBeCloseTo(3.5 * 0.5);
  });

  it("gives the radius the N nearest BF pixels reach", () => {
    const bytes = new Uint8Array(new Uint16Array([0, 100, 100, 141, 200]).buffer);
    const radii = decodeRadii(bytes);
    expect(Array.from(radii)).toEqual([0, 100, 100, 141, 200]);
    expect(subsetRadiusPx(radii, 1)).toBe(0);
    expect(subsetRadiusPx(radii, 4)).toBeCloseTo(1.41);
    expect(subsetRadiusPx(radii, 99)).toBe(2);
    expect(subsetRadiusPx(radii, 0)).toBeNull();
    expect(decodeRadii(null).length).toBe(0);
    expect(bfPixelsText(5, 5, 2)).toBe("all 5 BF pixels (r ≤ 2.0 px)");
    expect(bfPixelsText(4, 5, 1.41)).toBe("4 of 5 BF pixels (r ≤ 1.4 px)");
  });
});

describe("descan field", () => {
  const record: DescanRecord = {
    model: "plane", span_px: 1.2, residual_rms_px: 0.03, significant: true, applied: true,
    rows_px: [0, 10], cols_px: [0, 20], shift_px: [[0, 0], [0, 1], [0.5, 0], [0.5, 1]],
  };

  it("draws one arrow per grid point at its scan position, the longest 0.9 of the spacing", () => {
    const { arrows, pxPerCanvasPx } = descanArrows(record, { rows: 11, cols: 21 }, 210, 110);
    expect(arrows).toHaveLength(4);
    expect(arrows[0]).toEqual({ x0: 5, y0: 5, x1: 5, y1: 5 }); // no shift: a dot
    const longest = Math.max(...arrows.map((a) => Math.hypot(a.x1 - a.x0, a.y1 - a.y0)));
    expect(longest).toBeCloseTo(0.9 * 55); // spacing min(210/2, 110/2)
    const a = arrows[1]; // a column shift of 1 px points right
    expect(a.x0).toBe(205);
    expect(a.y1 - a.y0).toBeCloseTo(0);
    expect(a.x1 - a.x0).toBeGreaterThan(0);
    expect(pxPerCanvasPx).toBeCloseTo(Math.hypot(0.5, 1) / (0.9 * 55));
  });

  it("parses the trait's record and says what was found", () => {
    expect(parseDescan(record)).toEqual(record);
    expect(parseDescan(null)).toBeNull();
    expect(parseDescan({ ...record, shift_px: [[0, 0]] })).toBeNull();
    expect(descanText(record)).toBe("descan: plane fit, span 1.20 px, residual 0.03 px, corrected");
    expect(descanText({ ...record, applied: false })).toContain("below threshold (not corrected)");
    expect(descanText(null)).toBe("descan: not measured");
  });
});

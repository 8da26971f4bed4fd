import { describe, expect, it } from "vitest";
import { bilinear, lengthText, lineLengthA, plotLine, rescalePoint, sampleLine, type Image2D } from "./profile";
import { canvasToScan, fitViewport } from "./regions";
import { zoomAt } from "./view";

// a ramp: value = 2·row + 3·col at the pixel centres (row + 0.5, col + 0.5)
const rows = 20;
const cols = 30;
const ramp: Image2D = {
  values: Float64Array.from({ length: rows * cols }, (_, i) => 2 * Math.floor(i / cols) + 3 * (i % cols)),
  rows,
  cols,
};
const exact = (r: number, c: number) => 2 * (r - 0.5) + 3 * (c - 0.5);

describe("sampling along a line", () => {
  it("bilinear is exact on a ramp between pixel centres and clamps at the edges", () => {
    expect(bilinear(ramp, { r: 0.5, c: 0.5 })).toBe(0);
    expect(bilinear(ramp, { r: 7.3, c: 12.85 })).toBeCloseTo(exact(7.3, 12.85), 12);
    expect(bilinear(ramp, { r: 19.5, c: 29.5 })).toBeCloseTo(exact(19.5, 29.5), 12); // the last centre
    expect(bilinear(ramp, { r: 0, c: 0 })).toBe(0); // outside the centres: the edge value
    expect(bilinear(ramp, { r: 20, c: 30 })).toBeCloseTo(2 * 19 + 3 * 29, 12);
  });
  it("a diagonal line on the ramp samples a straight line, one sample per pixel of length", () => {
    const a = { r: 2.5, c: 3.5 };
    const b = { r: 14.5, c: 19.5 }; // 12 × 16: 20 px long
    const v = sampleLine(ramp, a, b);
    expect(v.length).toBe(21);
    v.forEach((x, i) => {
      const t = i / 20;
      expect(x).toBeCloseTo(exact(a.r + t * (b.r - a.r), a.c + t * (b.c - a.c)), 10);
    });
    expect(sampleLine(ramp, a, b, 5).length).toBe(5);
    expect(sampleLine(ramp, a, a).length).toBe(2); // a point: still a line of two equal samples
  });
  it("a 1-pixel-wide image (no neighbour to interpolate with) is read as it is", () => {
    const col: Image2D = { values: [1, 2, 3], rows: 3, cols: 1 };
    expect(bilinear(col, { r: 2, c: 0.5 })).toBeCloseTo(2.5, 12);
  });
});

describe("length in Å", () => {
  it("anisotropic sampling: each axis its own Å per pixel", () => {
    expect(lineLengthA({ r: 1, c: 1 }, { r: 4, c: 5 }, [0.5, 0.25])).toBeCloseTo(Math.hypot(1.5, 1), 12);
    expect(lineLengthA({ r: 0, c: 0 }, { r: 0, c: 10 }, [0.5, 0.25])).toBeCloseTo(2.5, 12);
    expect(lineLengthA({ r: 0, c: 0 }, { r: 10, c: 0 }, [0.5, 0.25])).toBeCloseTo(5, 12);
  });
  it("scan px → frame px of an upsampled frame gives the same length", () => {
    const scan = { rows: 96, cols: 96 };
    const frame = { rows: 192, cols: 192 };
    const a = { r: 10, c: 20 };
    const b = { r: 40, c: 60 };
    const inScan = lineLengthA(a, b, [0.6, 0.6]);
    const inFrame = lineLengthA(rescalePoint(a, scan, frame), rescalePoint(b, scan, frame), [0.3, 0.3]);
    expect(inFrame).toBeCloseTo(inScan, 12);
    expect(inScan).toBeCloseTo(30, 12); // 50 scan px × 0.6 Å
  });
  it("a drag of fixed screen length measures 1/zoom as much when zoomed in (view.ts transforms)", () => {
    const shape = { rows: 96, cols: 96 };
    const base = fitViewport(shape, 512);
    const size = { w: 512, h: 512 };
    const drag = (vp: typeof base) =>
      lineLengthA(canvasToScan({ x: 100, y: 200 }, vp), canvasToScan({ x: 200, y: 200 }, vp), [0.6, 0.6]);
    const vp = zoomAt(base, base, { x: 150, y: 300 }, 4, shape, size);
    expect(drag(base)).toBeCloseTo((100 / (512 / 96)) * 0.6, 10);
    expect(drag(vp)).toBeCloseTo(drag(base) / 4, 10);
  });
  it("text", () => {
    expect(lengthText(12.34)).toBe("12.3 Å");
    expect(lengthText(3.906)).toBe("3.91 Å");
    expect(lengthText(123.4)).toBe("123 Å");
  });
});

describe("plot", () => {
  it("maps the minimum to the bottom and the maximum to the top, first sample on the left", () => {
    const p = plotLine([1, 3, 2], 100, 50);
    expect(p.lo).toBe(1);
    expect(p.hi).toBe(3);
    expect(p.points).toEqual([{ x: 0, y: 50 }, { x: 50, y: 0 }, { x: 100, y: 25 }]);
  });
  it("a flat profile is a line across the middle", () => {
    const p = plotLine([0.2, 0.2], 100, 50);
    for (const q of p.points) expect(q.y).toBeCloseTo(25, 12);
  });
});

import { describe, expect, it } from "vitest";
import { canvasToScan, fitViewport } from "./regions";
import { MAX_ZOOM, clampViewport, panBy, visibleScan, wheelFactor, zoomAt, zoomOf } from "./view";

const shape = { rows: 96, cols: 96 };
const base = fitViewport(shape, 480); // 5 canvas px per scan px
const size = { w: 480, h: 480 };

describe("zoom and pan", () => {
  it("wheel zoom keeps the scan point under the pointer fixed", () => {
    const at = { x: 123, y: 321 };
    const before = canvasToScan(at, base);
    const vp = zoomAt(base, base, at, 2, shape, size);
    expect(zoomOf(vp, base)).toBeCloseTo(2, 12);
    const after = canvasToScan(at, vp);
    expect(after.r).toBeCloseTo(before.r, 10);
    expect(after.c).toBeCloseTo(before.c, 10);
    // twice more, elsewhere
    const at2 = { x: 400, y: 50 };
    const mid = canvasToScan(at2, vp);
    const vp2 = zoomAt(vp, base, at2, 1.5, shape, size);
    expect(canvasToScan(at2, vp2).c).toBeCloseTo(mid.c, 10);
    expect(zoomOf(vp2, base)).toBeCloseTo(3, 12);
  });
  it("zoom is clamped to [1, MAX_ZOOM] and zoom 1 is the whole scan", () => {
    const out = zoomAt(base, base, { x: 10, y: 10 }, 0.1, shape, size);
    expect(out).toEqual(base);
    const deep = zoomAt(base, base, { x: 10, y: 10 }, 1e6, shape, size);
    expect(zoomOf(deep, base)).toBe(MAX_ZOOM);
  });
  it("near an edge the view is clamped: the scan still covers the canvas", () => {
    const vp = zoomAt(base, base, { x: 0, y: 0 }, 4, shape, size);
    expect(vp.offsetX).toBe(0);
    expect(vp.offsetY).toBe(0);
    const panned = panBy(vp, 10_000, -10_000, shape, size);
    expect(panned.offsetX).toBe(0);
    expect(panned.offsetY).toBe(size.h - shape.rows * vp.scale);
  });
  it("a pointer -> scan mapping stays exact under zoom and pan", () => {
    let vp = zoomAt(base, base, { x: 240, y: 240 }, 3, shape, size);
    vp = panBy(vp, -37, 12, shape, size);
    // the canvas point of scan pixel corner (40, 50) maps back to it
    const x = 50 * vp.scale + vp.offsetX;
    const y = 40 * vp.scale + vp.offsetY;
    const p = canvasToScan({ x, y }, vp);
    expect(p.r).toBeCloseTo(40, 10);
    expect(p.c).toBeCloseTo(50, 10);
  });
  it("visible scan rectangle", () => {
    expect(visibleScan(base, shape, size)).toEqual({ r0: 0, r1: 96, c0: 0, c1: 96 });
    const vp = zoomAt(base, base, { x: 0, y: 0 }, 2, shape, size);
    const v = visibleScan(vp, shape, size);
    expect(v.r0).toBe(0);
    expect(v.r1).toBeCloseTo(48, 10);
    expect(v.c1).toBeCloseTo(48, 10);
  });
  it("a scan smaller than the canvas is centred", () => {
    const small = clampViewport({ scale: 2, offsetX: 0, offsetY: 0 }, { rows: 10, cols: 20 }, { w: 100, h: 100 });
    expect(small).toEqual({ scale: 2, offsetX: 30, offsetY: 40 });
  });
  it("wheel deltas: negative zooms in, one notch = WHEEL_STEP", () => {
    expect(wheelFactor(-100)).toBeCloseTo(1.25, 12);
    expect(wheelFactor(100)).toBeCloseTo(0.8, 12);
    expect(wheelFactor(-3, 1)).toBeGreaterThan(1);
  });
});

import { describe, expect, it } from "vitest";
import {
  canvasToScan, clampRect, fitViewport, handlePoint, hitTest, HANDLES, moveRect, rectFromDrag,
  rectToCanvas, resizeRect, scanToCanvas, type Rect,
} from "./regions";

const shape = { rows: 40, cols: 60 };
const R = (row_start: number, row_stop: number, col_start: number, col_stop: number): Rect =>
  ({ row_start, row_stop, col_start, col_stop });

describe("rectFromDrag", () => {
  const expected = R(2, 11, 3, 21);
  it.each([
    ["down-right", { r: 2.2, c: 3.5 }, { r: 10.4, c: 20.1 }],
    ["up-left", { r: 10.4, c: 20.1 }, { r: 2.2, c: 3.5 }],
    ["down-left", { r: 2.2, c: 20.1 }, { r: 10.4, c: 3.5 }],
    ["up-right", { r: 10.4, c: 3.5 }, { r: 2.2, c: 20.1 }],
  ])("same rectangle from any drag direction (%s)", (_name, a, b) => {
    expect(rectFromDrag(a, b, shape)).toEqual(expected);
  });
  it("clamps to the scan", () => {
    expect(rectFromDrag({ r: -5, c: -3 }, { r: 100, c: 70 }, shape)).toEqual(R(0, 40, 0, 60));
    expect(rectFromDrag({ r: 30, c: 50 }, { r: 55, c: 90 }, shape)).toEqual(R(30, 40, 50, 60));
  });
  it("is at least 1 px", () => {
    expect(rectFromDrag({ r: 5, c: 5 }, { r: 5, c: 5 }, shape)).toEqual(R(5, 6, 5, 6));
    expect(rectFromDrag({ r: 45, c: 70 }, { r: 45, c: 70 }, shape)).toEqual(R(39, 40, 59, 60));
  });
});

describe("clampRect", () => {
  it("orders, rounds and clamps", () => {
    expect(clampRect(R(10.4, 2.6, -4, 80), shape)).toEqual(R(3, 10, 0, 60));
  });
  it("keeps at least 1 px at the far edge", () => {
    expect(clampRect(R(40, 40, 60, 60), shape)).toEqual(R(39, 40, 59, 60));
  });
});

describe("moveRect", () => {
  const rect = R(10, 20, 10, 30);
  it("translates and keeps the size", () => {
    expect(moveRect(rect, 3.4, -2.6, shape)).toEqual(R(13, 23, 7, 27));
  });
  it("clamps at every edge and keeps the size", () => {
    expect(moveRect(rect, -50, -50, shape)).toEqual(R(0, 10, 0, 20));
    expect(moveRect(rect, 50, 50, shape)).toEqual(R(30, 40, 40, 60));
  });
});

describe("resizeRect", () => {
  const rect = R(10, 20, 10, 30);
  it.each([
    ["n", { r: 5, c: 99 }, R(5, 20, 10, 30)],
    ["s", { r: 25, c: 99 }, R(10, 25, 10, 30)],
    ["w", { r: 99, c: 4 }, R(10, 20, 4, 30)],
    ["e", { r: 99, c: 35 }, R(10, 20, 10, 35)],
    ["nw", { r: 5, c: 4 }, R(5, 20, 4, 30)],
    ["ne", { r: 5, c: 35 }, R(5, 20, 10, 35)],
    ["sw", { r: 25, c: 4 }, R(10, 25, 4, 30)],
    ["se", { r: 25.4, c: 34.6 }, R(10, 25, 10, 35)],
  ] as const)("handle %s moves only its edges", (handle, p, want) => {
    expect(resizeRect(rect, handle, p, shape)).toEqual(want);
  });
  it("never crosses the opposite edge (min 1 px)", () => {
    expect(resizeRect(rect, "n", { r: 35, c: 0 }, shape)).toEqual(R(19, 20, 10, 30));
    expect(resizeRect(rect, "e", { r: 0, c: -5 }, shape)).toEqual(R(10, 20, 10, 11));
  });
  it("never leaves the scan", () => {
    expect(resizeRect(rect, "se", { r: 99, c: 99 }, shape)).toEqual(R(10, 40, 10, 60));
    expect(resizeRect(rect, "nw", { r: -9, c: -9 }, shape)).toEqual(R(0, 20, 0, 30));
  });
});

describe("hitTest", () => {
  const a = { id: "a", ...R(10, 20, 10, 30) };
  const b = { id: "b", ...R(15, 25, 20, 40) }; // overlaps a, drawn later
  it("finds every handle of a region", () => {
    for (const h of HANDLES) {
      const p = handlePoint(a, h);
      expect(hitTest([a], { r: p.r + 0.3, c: p.c - 0.3 }, 1)).toEqual({ kind: "handle", region: a, handle: h });
    }
  });
  it("interior, and nothing outside", () => {
    expect(hitTest([a], { r: 12, c: 15 }, 1)).toEqual({ kind: "inside", region: a });
    expect(hitTest([a], { r: 35, c: 50 }, 1)).toBeNull();
  });
  it("topmost (last drawn) wins inside overlaps", () => {
    expect(hitTest([a, b], { r: 17, c: 25 }, 0.5)?.region.id).toBe("b");
    expect(hitTest([b, a], { r: 17, c: 25 }, 0.5)?.region.id).toBe("a");
  });
  it("handles win over interiors, even of a region on top", () => {
    // a's se corner (20, 30) lies inside b
    expect(hitTest([a, b], { r: 20, c: 30 }, 1)).toEqual({ kind: "handle", region: a, handle: "se" });
  });
});

describe("coordinate mapping", () => {
  it("fits the longer side into maxPx", () => {
    expect(fitViewport(shape, 480).scale).toBe(8);
    expect(fitViewport({ rows: 1024, cols: 256 }, 512).scale).toBe(0.5);
  });
  it("canvas <-> scan round trip with scale and offset", () => {
    const vp = { scale: 8, offsetX: 4, offsetY: 2 };
    expect(canvasToScan({ x: 84, y: 42 }, vp)).toEqual({ r: 5, c: 10 });
    expect(scanToCanvas({ r: 5, c: 10 }, vp)).toEqual({ x: 84, y: 42 });
    const p = { x: 123.25, y: 77.5 };
    const q = scanToCanvas(canvasToScan(p, vp), vp);
    expect(q.x).toBeCloseTo(p.x, 10);
    expect(q.y).toBeCloseTo(p.y, 10);
  });
  it("downscaled canvases map back to the right scan pixel", () => {
    const vp = fitViewport({ rows: 1024, cols: 1024 }, 512);
    expect(canvasToScan({ x: 256, y: 100 }, vp)).toEqual({ r: 200, c: 512 });
    expect(rectToCanvas(R(0, 512, 256, 1024), vp)).toEqual({ x: 128, y: 0, w: 384, h: 256 });
  });
});

import { describe, expect, it } from "vitest";
import { applyGesture, beginGesture, regionsDiffer, removeRegion } from "./interaction";
import type { Region } from "./model";

const shape = { rows: 40, cols: 60 };
const r1: Region = { id: "r1", row_start: 10, row_stop: 20, col_start: 10, col_stop: 20 };

describe("gestures", () => {
  it("press on empty scan starts drawing the next free id", () => {
    const g = beginGesture([r1], { r: 30, c: 40 }, 1);
    expect(g).toMatchObject({ kind: "draw", id: "r2" });
    const out = applyGesture([r1], g, { r: 35.5, c: 50.5 }, shape, 0.5);
    expect(out).toEqual([r1, { id: "r2", row_start: 30, row_stop: 36, col_start: 40, col_stop: 51 }]);
  });
  it("a click without drag adds nothing", () => {
    const g = beginGesture([r1], { r: 30, c: 40 }, 1);
    expect(applyGesture([r1], g, { r: 30.1, c: 40.1 }, shape, 0.5)).toEqual([r1]);
  });
  it("press inside moves, press on a handle resizes; others untouched", () => {
    const r2: Region = { id: "r2", row_start: 25, row_stop: 30, col_start: 40, col_stop: 50 };
    const move = beginGesture([r1, r2], { r: 15, c: 15 }, 1);
    expect(move.kind).toBe("move");
    const moved = applyGesture([r1, r2], move, { r: 18, c: 12 }, shape, 0.5);
    expect(moved[0]).toEqual({ id: "r1", row_start: 13, row_stop: 23, col_start: 7, col_stop: 17 });
    expect(moved[1]).toBe(r2);
    const resize = beginGesture([r1, r2], { r: 30, c: 50 }, 1);
    expect(resize).toMatchObject({ kind: "resize", id: "r2", handle: "se" });
    const resized = applyGesture([r1, r2], resize, { r: 33, c: 52 }, shape, 0.5);
    expect(resized[1]).toEqual({ id: "r2", row_start: 25, row_stop: 33, col_start: 40, col_stop: 52 });
    expect(resized[0]).toBe(r1);
  });
  it("regionsDiffer and removeRegion", () => {
    expect(regionsDiffer([r1], [{ ...r1 }])).toBe(false);
    expect(regionsDiffer([r1], [{ ...r1, col_stop: 21 }])).toBe(true);
    expect(regionsDiffer([r1], [])).toBe(true);
    expect(removeRegion([r1], "r1")).toEqual([]);
  });
});

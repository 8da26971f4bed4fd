import { describe, expect, it } from "vitest";
import { asStatus, fmt, nextRegionId, parseCropMessage, parseRegions, parseShape, regionsForWire, toBytes } from "./model";

describe("model typing helpers", () => {
  it("asStatus accepts the four states only", () => {
    for (const s of ["idle", "fitting", "done", "error"]) expect(asStatus(s)).toBe(s);
    expect(asStatus("bogus")).toBe("idle");
    expect(asStatus(undefined)).toBe("idle");
  });
  it("parseRegions keeps well-formed integer regions", () => {
    const good = { id: "r1", row_start: 0, row_stop: 4, col_start: 1, col_stop: 5 };
    expect(parseRegions([good, { id: 3 }, { ...good, id: "r2", row_stop: 2.5 }, null, "x"])).toEqual([good]);
    expect(parseRegions(null)).toEqual([]);
  });
  it("parseShape", () => {
    expect(parseShape([32, 48])).toEqual({ rows: 32, cols: 48 });
    expect(parseShape([])).toBeNull();
    expect(parseShape([0, 3])).toBeNull();
  });
  it("nextRegionId takes the smallest free rN", () => {
    expect(nextRegionId([])).toBe("r1");
    expect(nextRegionId([{ id: "r1" }, { id: "r3" }])).toBe("r2");
    expect(nextRegionId([{ id: "r2" }, { id: "r1" }])).toBe("r3");
  });
  it("parseCropMessage", () => {
    expect(parseCropMessage({ type: "crop", id: "r1", generation: 2 })).toEqual({ type: "crop", id: "r1", generation: 2, behind: 0, shape: undefined });
    expect(parseCropMessage({ type: "crop", id: "r1", generation: 5, behind: 3, shape: [4, 4] })).toEqual({ type: "crop", id: "r1", generation: 5, behind: 3, shape: [4, 4] });
    expect(parseCropMessage({ type: "crop", id: "r1", generation: 5, behind: -1 })?.behind).toBe(0);
    expect(parseCropMessage({ type: "crop", id: "r1" })).toBeNull();
    expect(parseCropMessage({ type: "other" })).toBeNull();
  });
  it("toBytes views DataView / ArrayBuffer / typed arrays without copying", () => {
    const buf = new Uint8Array([0, 1, 2, 3, 4]).buffer;
    expect(Array.from(toBytes(new DataView(buf, 1, 3)) ?? [])).toEqual([1, 2, 3]);
    expect(toBytes(buf)?.byteLength).toBe(5);
    expect(toBytes("nope")).toBeNull();
  });
  it("regionsForWire copies plain fields only", () => {
    const r = { id: "r1", row_start: 0, row_stop: 1, col_start: 0, col_stop: 1, extra: 5 };
    const out = regionsForWire([r]);
    expect(out).toEqual([{ id: "r1", row_start: 0, row_stop: 1, col_start: 0, col_stop: 1 }]);
    expect(out[0]).not.toBe(r);
  });
  it("fmt", () => {
    expect(fmt(1.234, 2)).toBe("1.23");
    expect(fmt(null)).toBe("–");
    expect(fmt(Number.NaN)).toBe("–");
  });
});

describe("frame, exported and progress messages", () => {
  it("parseFrameMessage keeps typed fields and refuses malformed frames", async () => {
    const { parseFrameMessage } = await import("./model");
    const ok = parseFrameMessage({
      type: "frame", seq: 7, params: { C10: -3, x: "no" }, rotation_deg: 12, loss: 0.25, view: "amplitude",
      shape: [4, 6], range: [-1, 2], sampling_A: [0.3, 0.3],
    });
    expect(ok).toEqual({
      type: "frame", seq: 7, params: { C10: -3 }, rotation_deg: 12, loss: 0.25, view: "amplitude",
      shape: [4, 6], range: [-1, 2], sampling_A: [0.3, 0.3], draft: false,
    });
    const draft = parseFrameMessage({ type: "frame", seq: 8, shape: [2, 3], range: [0, 1], draft: true });
    expect(draft?.draft).toBe(true);
    expect(parseFrameMessage({ type: "frame", seq: 8, shape: [2, 3], range: [0, 1], draft: "yes" })?.draft).toBe(false);
    expect(parseFrameMessage({ type: "frame", seq: 1, shape: [0, 3], range: [0, 1] })).toBeNull();
    expect(parseFrameMessage({ type: "frame", seq: 1, shape: [2, 3] })).toBeNull();
    expect(parseFrameMessage({ type: "crop", seq: 1, shape: [2, 3], range: [0, 1] })).toBeNull();
  });
  it("parseExportedMessage and parseProgress", async () => {
    const { parseExportedMessage, parseProgress, parseSampling } = await import("./model");
    expect(parseExportedMessage({ type: "exported", files: ["a.png", 3] })).toEqual({ type: "exported", files: ["a.png"], error: "" });
    expect(parseExportedMessage({ type: "frame" })).toBeNull();
    expect(parseProgress({ stage: "newton", done: 3, total: 9, elapsed_s: 1.5 })).toEqual({ stage: "newton", done: 3, total: 9, elapsed_s: 1.5 });
    expect(parseProgress({ stage: "bogus" }).stage).toBe("");
    expect(parseSampling([0.3, 0.25])).toEqual([0.3, 0.25]);
    expect(parseSampling([0, 1])).toBeNull();
  });
});

import { describe, expect, it } from "vitest";
import { lut } from "./colormaps";
import { codeToValue, decodeCodes, frameValues, lutIndex, paintFrame, type Frame } from "./frame";

describe("frame decoding", () => {
  it("reads little-endian uint16 at any byte offset", () => {
    const buf = new Uint8Array([9, 0x34, 0x12, 0xff, 0xff, 0x00, 0x00, 0x01, 0x00]);
    const codes = decodeCodes(buf.subarray(1), 2, 2);
    expect(Array.from(codes)).toEqual([0x1234, 65535, 0, 1]);
  });
  it("aligned and unaligned buffers decode alike", () => {
    const buf = new Uint8Array(2 + 2 * 6);
    for (let i = 0; i < buf.length; i++) buf[i] = (37 * i + 11) % 256;
    const aligned = decodeCodes(buf.subarray(2), 2, 3);
    const copy = new Uint8Array(1 + 12);
    copy.set(buf.subarray(2), 1);
    expect(Array.from(decodeCodes(copy.subarray(1), 3, 2))).toEqual(Array.from(aligned));
    expect(aligned[0]).toBe(buf[2] + 256 * buf[3]);
  });
  it("refuses a buffer of the wrong size, naming both sizes", () => {
    expect(() => decodeCodes(new Uint8Array(6), 2, 2)).toThrow(/6 bytes, expected 8/);
    expect(() => decodeCodes(new Uint8Array(0), 0, 2)).toThrow(/empty/);
  });
  it("code -> value spans [lo, hi]", () => {
    const f: Frame = { codes: new Uint16Array([0, 65535, 32768]), rows: 1, cols: 3, lo: -Math.PI, hi: Math.PI };
    expect(codeToValue(f, 0)).toBe(-Math.PI);
    expect(codeToValue(f, 65535)).toBeCloseTo(Math.PI, 12);
    const v = frameValues(f);
    expect(v[2]).toBeCloseTo(-Math.PI + (2 * Math.PI * 32768) / 65535, 12);
  });
});

describe("painting through a LUT", () => {
  it("lutIndex clamps and splits [cmin, cmax] into 256 equal steps", () => {
    expect(lutIndex(-1, 0, 1)).toBe(0);
    expect(lutIndex(2, 0, 1)).toBe(255);
    expect(lutIndex(0.5, 0, 1)).toBe(128);
    expect(lutIndex(0.999, 0, 1)).toBe(255);
    expect(lutIndex(1 / 256 - 1e-9, 0, 1)).toBe(0);
    expect(lutIndex(0.3, 0.3, 0.3)).toBe(255); // degenerate window: a step
  });
  it("gray paints values linearly between the contrast limits", () => {
    const f: Frame = { codes: new Uint16Array([0, 65535, 32768, 16384]), rows: 2, cols: 2, lo: 0, hi: 2 };
    const px = paintFrame(f, lut("gray"), 0, 1);
    expect(Array.from(px.subarray(0, 4))).toEqual([0, 0, 0, 255]); // value 0
    expect(Array.from(px.subarray(4, 8))).toEqual([255, 255, 255, 255]); // 2 > cmax
    expect(px[8]).toBe(255); // value ≈ 1.0 = cmax
    expect(px[12]).toBe(128); // value ≈ 0.5
  });
  it("the painted index of every code is lutIndex of its value", () => {
    const codes = new Uint16Array(65536).map((_, i) => i);
    const f: Frame = { codes, rows: 256, cols: 256, lo: -1.3, hi: 2.9 };
    const px = paintFrame(f, lut("gray"), -0.7, 1.1);
    for (let code = 0; code < 65536; code += 7) {
      expect(px[4 * code]).toBe(lutIndex(codeToValue(f, code), -0.7, 1.1));
    }
  });
  it("a different colormap changes the pixels", () => {
    const f: Frame = { codes: new Uint16Array([1000, 30000, 60000]), rows: 1, cols: 3, lo: 0, hi: 1 };
    const a = paintFrame(f, lut("gray"), 0, 1);
    const b = paintFrame(f, lut("viridis"), 0, 1);
    expect(Array.from(a)).not.toEqual(Array.from(b));
  });
});

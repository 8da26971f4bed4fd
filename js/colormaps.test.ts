import { describe, expect, it } from "vitest";
import { COLORMAPS, CYCLIC, isColormap, lut, parseLut } from "./colormaps";

const rgb = (t: Uint8ClampedArray, i: number) => [t[4 * i], t[4 * i + 1], t[4 * i + 2], t[4 * i + 3]];
const luminance = (t: Uint8ClampedArray, i: number) => 0.2126 * t[4 * i] + 0.7152 * t[4 * i + 1] + 0.0722 * t[4 * i + 2];

describe("colormap tables", () => {
  it("every map has 256 opaque entries", () => {
    for (const name of COLORMAPS) {
      const t = lut(name);
      expect(t.length).toBe(1024);
      for (let i = 0; i < 256; i++) expect(t[4 * i + 3]).toBe(255);
    }
  });
  it("gray is the identity ramp", () => {
    const t = lut("gray");
    for (const i of [0, 1, 77, 128, 254, 255]) expect(rgb(t, i)).toEqual([i, i, i, 255]);
  });
  it("viridis, inferno and magma match matplotlib's published end points", () => {
    // matplotlib _cm_listed: viridis[0] = (0.267004, 0.004874, 0.329415), viridis[255] = (0.993248, 0.906157, 0.143936)
    expect(rgb(lut("viridis"), 0)).toEqual([68, 1, 84, 255]);
    expect(rgb(lut("viridis"), 255)).toEqual([253, 231, 37, 255]);
    // inferno[0] = (0.001462, 0.000466, 0.013866), magma[255] = (0.987053, 0.991438, 0.749504)
    expect(rgb(lut("inferno"), 0)).toEqual([0, 0, 4, 255]);
    expect(rgb(lut("magma"), 255)).toEqual([252, 253, 191, 255]);
  });
  it("the sequential maps brighten monotonically (perceptual)", () => {
    for (const name of ["viridis", "inferno", "magma"] as const) {
      const t = lut(name);
      for (let i = 8; i < 256; i += 8) expect(luminance(t, i)).toBeGreaterThan(luminance(t, i - 8));
    }
  });
  it("twilight is cyclic: its ends meet, its middle is far", () => {
    const t = lut("twilight");
    const dist = (i: number, j: number) => Math.hypot(t[4 * i] - t[4 * j], t[4 * i + 1] - t[4 * j + 1], t[4 * i + 2] - t[4 * j + 2]);
    expect(CYCLIC.has("twilight")).toBe(true);
    expect(dist(0, 255)).toBeLessThan(8);
    expect(dist(0, 128)).toBeGreaterThan(100);
  });
  it("rejects malformed tables and names", () => {
    expect(() => parseLut("ff00")).toThrow(/entries/);
    expect(isColormap("viridis")).toBe(true);
    expect(isColormap("jet")).toBe(false);
  });
});

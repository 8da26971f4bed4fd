import { describe, expect, it } from "vitest";
import { lut, LUT_SIZE } from "./colormaps";
import { endLabels, formatLimit, gradientPixels } from "./colourscale";

describe("colour bar ends", () => {
  it("counts whole, phases to three digits, extremes in exponent form", () => {
    expect(formatLimit(49018.4)).toBe("49018");
    expect(formatLimit(-0.123456)).toBe("-0.123");
    expect(formatLimit(0.5)).toBe("0.5");
    expect(formatLimit(3.14159)).toBe("3.14");
    expect(formatLimit(0)).toBe("0");
    expect(formatLimit(2.5e-5)).toBe("2.50e-5");
    expect(formatLimit(1.5e7)).toBe("1.50e+7");
    expect(formatLimit(NaN)).toBe("–");
  });
  it("each end carries the unit", () => {
    expect(endLabels([-0.1, 0.25], "rad")).toEqual(["-0.1 rad", "0.25 rad"]);
    expect(endLabels([100, 2000], "counts")).toEqual(["100 counts", "2000 counts"]);
    expect(endLabels([1, 2], "")).toEqual(["1", "2"]);
  });
});

describe("colour bar gradient", () => {
  it("is the colormap, highest value at the top, opaque", () => {
    const px = gradientPixels(lut("viridis"));
    expect(px.length).toBe(4 * LUT_SIZE);
    expect(Array.from(px.slice(0, 4))).toEqual([253, 231, 37, 255]); // viridis' top end
    expect(Array.from(px.slice(-4))).toEqual([68, 1, 84, 255]); // and its bottom end
    expect(Array.from(px.slice(4 * 100, 4 * 100 + 4))).toEqual(Array.from(lut("viridis").slice(4 * 155, 4 * 156)));
    expect(px.every((v, i) => i % 4 !== 3 || v === 255)).toBe(true);
    expect(() => gradientPixels(new Uint8ClampedArray(8))).toThrow(/entries/);
  });
});

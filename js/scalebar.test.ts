import { describe, expect, it } from "vitest";
import { chooseScaleBar, scaleBarText } from "./scalebar";

describe("scale bar", () => {
  it("picks the longest 1/2/5 × 10^k length that fits", () => {
    // 0.3 Å per image px shown at 5 CSS px per image px -> 16.67 px/Å; 120 px max -> 7.2 Å -> 5 Å
    const bar = chooseScaleBar(5 / 0.3, 120)!;
    expect(bar.lengthA).toBe(5);
    expect(bar.px).toBeCloseTo(5 * (5 / 0.3), 10);
    expect(bar.text).toBe("5 Å");
    expect(chooseScaleBar(10, 100)!.lengthA).toBe(10);
    expect(chooseScaleBar(10, 99)!.lengthA).toBe(5);
    expect(chooseScaleBar(1, 250)!.lengthA).toBe(200);
    expect(chooseScaleBar(100, 30)!.lengthA).toBeCloseTo(0.2, 12);
  });
  it("the bar is never longer than allowed and at least 40 % of it", () => {
    for (const pxPerA of [0.37, 1, 2.9, 13.3, 77.7]) {
      for (const maxPx of [60, 100, 150]) {
        const bar = chooseScaleBar(pxPerA, maxPx)!;
        expect(bar.px).toBeLessThanOrEqual(maxPx + 1e-9);
        expect(bar.px).toBeGreaterThanOrEqual(0.4 * maxPx);
        const mant = bar.lengthA / 10 ** Math.floor(Math.log10(bar.lengthA) + 1e-9);
        expect([1, 2, 5]).toContain(Math.round(mant));
      }
    }
  });
  it("text: Å below 1 nm, nm from 1 nm", () => {
    expect(scaleBarText(10)).toBe("1 nm");
    expect(scaleBarText(20)).toBe("2 nm");
    expect(scaleBarText(500)).toBe("50 nm");
    expect(scaleBarText(5)).toBe("5 Å");
    expect(scaleBarText(0.5)).toBe("0.5 Å");
  });
  it("no bar without a sampling", () => {
    expect(chooseScaleBar(0, 100)).toBeNull();
    expect(chooseScaleBar(NaN, 100)).toBeNull();
    expect(chooseScaleBar(3, 0)).toBeNull();
  });
});

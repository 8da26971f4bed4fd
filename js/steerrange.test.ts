import { describe, expect, it } from "vitest";
import type { ParamRow } from "./paramtable";
import { clamp, ERROR_SPANS, fineStep, Gearing, homeRange, keyStep, snap, widened } from "./steerrange";

const row = (over: Partial<ParamRow>): ParamRow => ({
  name: "C10", unit: "Å", label: "C10", box: [-500, 500], digits: 1, period: null, non_negative: false,
  opt_in: null, fittable: true, span: 50, ...over,
});
const C10 = row({});
const C12 = row({ name: "C12", box: [0, 100], non_negative: true, span: 20 });
const PHI = row({ name: "phi12", unit: "rad", box: [-1.5708, 1.5708], digits: 3, period: Math.PI, span: Math.PI / 4 });
const C30 = row({ name: "C30", box: [-2e5, 2e5], digits: 0, span: null, opt_in: "C30" });

describe("home range", () => {
  it("is centred on the fitted value with the parameter's span, on whole steps", () => {
    expect(homeRange(C10, -49.807, 0.2)).toEqual({ min: -99.9, max: 0.2, step: 0.1 });
    // 100 Å over a 159 px slider: 0.63 Å per pixel (the default box gave 6.3)
    const r = homeRange(C10, -49.807, 0.2);
    expect((r.max - r.min) / 159).toBeLessThan(0.7);
    expect(homeRange(PHI, 0.5)).toEqual({ min: -0.286, max: 1.286, step: 0.001 });
  });
  it("widens to a few errors where the fit is uncertain, never beyond half the box", () => {
    const r = homeRange(C10, 10, 30); // 5σ = 150 Å > 50 Å
    expect(r.min).toBeCloseTo(10 - ERROR_SPANS * 30, 9);
    expect(r.max).toBeCloseTo(10 + ERROR_SPANS * 30, 9);
    expect(homeRange(C10, 0, 1e4)).toEqual({ min: -500, max: 500, step: 0.1 }); // half the box
  });
  it("stops at 0 for non-negative parameters", () => {
    expect(homeRange(C12, 15.001, 0.1)).toEqual({ min: 0, max: 35.1, step: 0.1 });
  });
  it("is the default box without a span or a fitted value", () => {
    expect(homeRange(C30, 0)).toEqual({ min: -2e5, max: 2e5, step: 1 });
    expect(homeRange(C10, null)).toEqual({ min: -500, max: 500, step: 0.1 });
    expect(homeRange(C30, 3e5).max).toBe(3e5); // an opted-in fit beyond the box is held
  });
});

describe("widening and reset", () => {
  it("a value outside widens the range to hold it; inside leaves it", () => {
    const home = homeRange(C10, -49.8, 0.2);
    const wide = widened(home, -5000, C10);
    expect(wide).toEqual({ min: -5000, max: home.max, step: 0.1 });
    expect(widened(wide, -40, C10)).toBe(wide);
    expect(widened(home, 612.34, C10).max).toBeCloseTo(612.4, 9);
    // reset to fit: the home range of the same fit, not the widened one
    expect(homeRange(C10, -49.8, 0.2)).toEqual(home);
  });
});

describe("fine steps", () => {
  it("arrow keys step one digit, Shift a tenth, PageUp/Down ten, clamped to the range", () => {
    const r = homeRange(C10, 0, 0);
    expect(keyStep(C10, r, 1.2, "ArrowRight", false)).toBe(1.3);
    expect(keyStep(C10, r, 1.2, "ArrowLeft", true)).toBe(1.19);
    expect(keyStep(C10, r, 1.2, "ArrowUp", true)).toBe(1.21);
    expect(keyStep(C10, r, 1.2, "PageDown", false)).toBe(0.2);
    expect(keyStep(C10, r, 49.95, "PageUp", false)).toBe(50);
    expect(keyStep(C10, r, 1.2, "Home", false)).toBeNull();
    expect(fineStep(PHI)).toBeCloseTo(1e-4, 12);
    expect(snap(C10, 0.1 + 0.2)).toBe(0.3);
    expect(clamp(-70, r)).toBe(-50);
  });
  it("a Shift drag moves a tenth as fast from where the value was, without jumps", () => {
    const g = new Gearing();
    g.start(-49.8);
    expect(g.map(-30, true)).toBeCloseTo(-49.8, 9); // Shift at the press: no jump to the pointer
    expect(g.map(-20, true)).toBeCloseTo(-48.8, 9); // 10 Å of pointer: 1 Å
    expect(g.map(-10, false)).toBeCloseTo(-48.8, 9); // Shift released: continues from there
    expect(g.map(0, false)).toBeCloseTo(-38.8, 9); // at full speed
    expect(g.map(10, true)).toBeCloseTo(-38.8, 9);
    expect(g.map(0, true)).toBeCloseTo(-39.8, 9);
  });
  it("a drag without Shift follows the pointer", () => {
    const g = new Gearing();
    g.start(-49.8);
    expect(g.map(12.5, false)).toBe(12.5);
    expect(g.map(13, false)).toBe(13);
  });
});

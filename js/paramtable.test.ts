import { describe, expect, it } from "vitest";
import { completeParams, formatParam, higherRows, jointRows, parseParamTable } from "./paramtable";

// rows shaped as python/livessb/params.py table_for_frontend() sends them
const wire = [
  { name: "C10", unit: "Å", label: "C10", box: [-500, 500], scale: 10, digits: 1, period: null, mirror_sign: -1, non_negative: false, opt_in: null, slice_span: 50 },
  { name: "phi12", unit: "rad", label: "φ12", box: [-1.5708, 1.5708], scale: 0.1, digits: 3, period: 3.14159, mirror_sign: 1, non_negative: false, opt_in: null },
  { name: "C21", unit: "Å", label: "C21", box: [0, 2000], scale: 50, digits: 0, period: null, mirror_sign: 1, non_negative: true, opt_in: "C21" },
  { name: "C32", unit: "Å", label: "C32", box: [0, 1e5], scale: 1e3, digits: 0, period: null, mirror_sign: 1, non_negative: true, opt_in: null, fittable: false },
  { name: "broken", box: "x" },
  null,
];

describe("parameter table", () => {
  it("parses rows and drops malformed ones", () => {
    const t = parseParamTable(wire);
    expect(t.map((r) => r.name)).toEqual(["C10", "phi12", "C21", "C32"]);
    expect(t[0].fittable).toBe(true); // absent: fittable
    expect(t[3].fittable).toBe(false);
    expect(t[1]).toMatchObject({ unit: "rad", label: "φ12", digits: 3, period: 3.14159, opt_in: null });
    expect(t[2].non_negative).toBe(true);
    expect(parseParamTable(undefined)).toEqual([]);
  });
  it("joint vs higher-order rows", () => {
    const t = parseParamTable(wire);
    expect(jointRows(t).map((r) => r.name)).toEqual(["C10", "phi12"]);
    expect(higherRows(t).map((r) => r.name)).toEqual(["C21", "C32"]); // opt-in and reconstruction-only
  });
  it("the slider span comes from slice_span (absent or not positive: none)", () => {
    const t = parseParamTable([...wire, { name: "x", box: [0, 1], slice_span: -2 }]);
    expect(t.map((r) => r.span)).toEqual([50, null, null, null, null]);
  });
  it("formats with the table's digits and unit", () => {
    const [c10, phi] = parseParamTable(wire);
    expect(formatParam(c10, 12.345)).toBe("12.3 Å");
    expect(formatParam(phi, 0.5)).toBe("0.500 rad");
    expect(formatParam(c10, undefined)).toBe("– Å");
  });
  it("complete params: known values kept, others 0 inside the box", () => {
    const t = parseParamTable(wire);
    expect(completeParams(t, { C10: -40 })).toEqual({ C10: -40, phi12: 0, C21: 0, C32: 0 });
  });
});

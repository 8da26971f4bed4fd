import { describe, expect, it } from "vitest";
import type { ParamRow } from "./paramtable";
import { EDGE_WARNING, modelText, NOT_DETERMINED, parseTrust, readout } from "./readout";

const row = (name: string, unit: string, digits: number): ParamRow => ({
  name, unit, label: name, box: [-10, 10], digits, period: null, non_negative: false, opt_in: null, fittable: true, span: null,
});
const C10 = row("C10", "Å", 1);
const TILT = row("tilt_row_mrad", "mrad", 2);

describe("readout", () => {
  it("shows value ± error in the table's digits and unit", () => {
    const t = parseTrust({ errors: { C10: 0.4321 }, undetermined: [], on_box_edge: [], model: "thin" });
    expect(readout(C10, -12.345, t)).toEqual({ text: "-12.3 ± 0.4 Å", state: "value" });
    expect(modelText(t)).toBe("thin model");
  });
  it("says not determined instead of a value", () => {
    const t = parseTrust({ errors: { tilt_row_mrad: 0 }, undetermined: ["tilt_row_mrad", "depth"] });
    expect(readout(TILT, 7.77, t)).toEqual({ text: NOT_DETERMINED, state: "undetermined" });
  });
  it("warns for a value on a box edge", () => {
    const t = parseTrust({ errors: { tilt_row_mrad: 1.5 }, on_box_edge: ["tilt_row_mrad"] });
    const r = readout(TILT, 15, t);
    expect(r.state).toBe("edge");
    expect(r.text).toBe(`15.00 ± 1.50 mrad ${EDGE_WARNING}`);
  });
  it("omits ± where no error is known (held, or older records)", () => {
    expect(readout(C10, 3, parseTrust({}))).toEqual({ text: "3.0 Å", state: "value" });
    expect(readout(C10, 3, parseTrust({ errors: { C10: 0 } })).text).toBe("3.0 Å");
    expect(readout(C10, undefined, parseTrust(null)).state).toBe("missing");
    expect(modelText(parseTrust({ model: null }))).toBe("");
  });
  it("ignores malformed fields", () => {
    const t = parseTrust({ errors: { C10: "x" }, undetermined: [1, "C10"], on_box_edge: "C10", model: 3 });
    expect(t).toEqual({ errors: {}, undetermined: ["C10"], onBoxEdge: [], model: null, crystal: "" });
    expect(parseTrust({ crystal: 7 }).crystal).toBe("");
  });
  it("carries what crystal mode did", () => {
    const text = "lattice model, periods 3.9, 3.9 Å, 112 points, contrast 7.1x";
    expect(parseTrust({ crystal: text }).crystal).toBe(text);
    expect(parseTrust({}).crystal).toBe("");
  });
});

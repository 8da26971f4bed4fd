import { describe, expect, it } from "vitest";
import { addPin, exportPinsMessage, removePin, type Pin } from "./pins";
import { parseTrials, stepIndex } from "./trials";

describe("trials", () => {
  it("parses the wire list, dropping malformed entries", () => {
    const t = parseTrials([{ n: 3, loss: 0.5, params: { C10: 1, bad: "x" } }, { n: 1.5, loss: 1, params: {} }, null]);
    expect(t).toEqual([{ n: 3, loss: 0.5, params: { C10: 1 } }]);
  });
  it("←/→ step through the list, clamped; none selected starts at an end", () => {
    expect(stepIndex(-1, 1, 5)).toBe(0);
    expect(stepIndex(-1, -1, 5)).toBe(4);
    expect(stepIndex(0, -1, 5)).toBe(0);
    expect(stepIndex(2, 1, 5)).toBe(3);
    expect(stepIndex(4, 1, 5)).toBe(4);
    expect(stepIndex(7, 1, 5)).toBe(0);
    expect(stepIndex(0, 1, 0)).toBe(-1);
  });
});

describe("pins", () => {
  const base: Omit<Pin, "name"> = {
    params: { C10: -40, C12: 3 }, rotation_deg: 12.5, loss: 0.1, view: "phase", colormap: "viridis", contrast: [-0.5, 0.7],
  };
  it("names pins pin1, pin2, … reusing freed numbers; snapshots are copies", () => {
    let pins = addPin([], base);
    pins = addPin(pins, { ...base, params: { C10: 5 } });
    expect(pins.map((p) => p.name)).toEqual(["pin1", "pin2"]);
    pins = removePin(pins, "pin1");
    pins = addPin(pins, base);
    expect(pins.map((p) => p.name)).toEqual(["pin2", "pin1"]);
    expect(pins[1].params).not.toBe(base.params);
  });
  it("export payload carries params, view, colormap and contrast of each pin", () => {
    const msg = exportPinsMessage("out", addPin([], base));
    expect(msg).toEqual({
      type: "export_pins", dir: "out",
      pins: [{ name: "pin1", params: { C10: -40, C12: 3 }, rotation_deg: 12.5, view: "phase", colormap: "viridis", contrast: [-0.5, 0.7] }],
    });
    expect(JSON.parse(JSON.stringify(msg))).toEqual(msg);
  });
});

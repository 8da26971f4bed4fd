import { describe, expect, it } from "vitest";
import { lut } from "./colormaps";
import { cellEdges, colorRange, legendValues, overlayColor, overlayTiles, parseMapOverlays } from "./overlay";

// A 2×2 map of C10 over a 64×64 scan in 32² tiles, as MapResult.overlay writes it.
const record = {
  parameter: "C10", label: "C10", unit: "Å", digits: 1, grid_shape: [2, 2], tile: [32, 32], step: [32, 32],
  bounds: [[[0, 32, 0, 32], [0, 32, 32, 64]], [[32, 64, 0, 32], [32, 64, 32, 64]]],
  centers_px: [[[15.5, 15.5], [15.5, 47.5]], [[47.5, 15.5], [47.5, 47.5]]],
  values: [[-10, 10], [0, 99]], errors: [[0.5, 0.5], [null, 0.5]],
  undetermined: [[false, false], [false, true]], on_box_edge: [[false, true], [false, false]],
  fixed: false, range: [-10, 99],
};
const trait = { parameters: ["C10", "bogus"], overlays: { C10: record, bogus: { parameter: "bogus" } } };

describe("overlay", () => {
  it("parses the trait, keeping well-formed maps only", () => {
    const maps = parseMapOverlays(trait);
    expect(maps?.parameters).toEqual(["C10"]);
    expect(maps?.overlays.C10.errors[1][0]).toBeNull();
    expect(parseMapOverlays({})).toBeNull();
    expect(parseMapOverlays(null)).toBeNull();
  });
  it("puts cell edges midway between tile centres, outer ones on the scan edge", () => {
    expect(cellEdges([15.5, 47.5], 64)).toEqual([0, 32, 64]);
    expect(cellEdges([15.5, 40.5, 63.5], 80)).toEqual([0, 28.5, 52.5, 80]);
  });
  it("maps the range ends to the colormap ends and clamps beyond", () => {
    const t = lut("viridis");
    const first = [t[0], t[1], t[2]];
    const last = [t[1020], t[1021], t[1022]];
    expect(overlayColor(-10, [-10, 10])).toEqual(first);
    expect(overlayColor(10, [-10, 10])).toEqual(last);
    expect(overlayColor(50, [-10, 10])).toEqual(last);
    expect(overlayColor(3, [3, 3])).toEqual([t[512], t[513], t[514]]);
  });
  it("colours determined tiles over their own range and leaves undetermined ones uncoloured", () => {
    const ov = parseMapOverlays(trait)!.overlays.C10;
    expect(colorRange(ov)).toEqual([-10, 10]); // 99 is undetermined: not in the range
    const tiles = overlayTiles(ov, 64, 64);
    expect(tiles.map((t) => [t.row_start, t.row_stop, t.col_start, t.col_stop])).toEqual([
      [0, 32, 0, 32], [0, 32, 32, 64], [32, 64, 0, 32], [32, 64, 32, 64]]);
    expect(tiles[0].rgb).toEqual(overlayColor(-10, [-10, 10]));
    expect(tiles[3].rgb).toBeNull();
    expect(tiles[3].undetermined).toBe(true);
    expect(tiles[1].edge).toBe(true);
  });
  it("gives the legend's range in the table's digits, the unit and the flagged tiles", () => {
    const ov = parseMapOverlays(trait)!.overlays.C10;
    expect(legendValues(ov)).toEqual({ low: "-10.0", high: "10.0", unit: "Å", undeterminedTiles: 1, edgeTiles: 1, fixed: false });
    const none = { ...ov, undetermined: [[true, true], [true, true]] };
    expect(legendValues(none).low).toBe("–");
  });
});

import { describe, expect, it } from "vitest";
import { tooSmall } from "./scaninput";

describe("minimum region", () => {
  it("refuses a region with a side below the minimum, naming its size and the minimum", () => {
    const r = { id: "r2", row_start: 10, row_stop: 14, col_start: 0, col_stop: 30 };
    expect(tooSmall(r, 8)).toMatch(/r2 is 4×30 scan px.*at least 8×8/);
    expect(tooSmall({ ...r, row_stop: 18 }, 8)).toBeNull();
  });
});

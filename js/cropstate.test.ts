import { describe, expect, it } from "vitest";
import { acceptCrop, cropStatusText } from "./cropstate";

describe("crop ordering", () => {
  it("paints only a newer edit's crop", () => {
    expect(acceptCrop(-1, 1)).toBe(true); // the first crop
    expect(acceptCrop(3, 5)).toBe(true);
    expect(acceptCrop(5, 3)).toBe(false); // stale: never over a newer one
    expect(acceptCrop(5, 5)).toBe(false); // a re-send of the crop shown
  });
  it("status line says how far the crop trails while fitting", () => {
    expect(cropStatusText("fitting", "", 0)).toBe("fitting");
    expect(cropStatusText("fitting", "", 1)).toBe("fitting (crop 1 edit behind)");
    expect(cropStatusText("fitting", "", 4)).toBe("fitting (crop 4 edits behind)");
    expect(cropStatusText("done", "", 0)).toBe("done");
    expect(cropStatusText("error", "boom", 2)).toBe("error: boom");
    // crystal mode's step while it fits; gone once done
    expect(cropStatusText("fitting", "", 0, "crystal mode 2/5")).toBe("fitting (crystal mode 2/5)");
    expect(cropStatusText("fitting", "", 1, "crystal mode 4/5")).toBe("fitting (crystal mode 4/5, crop 1 edit behind)");
    expect(cropStatusText("done", "", 0, "crystal mode 5/5")).toBe("done");
  });
});

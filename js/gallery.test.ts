import { describe, expect, it } from "vitest";
import { containScale, featuredRegion } from "./gallery";

describe("featuredRegion", () => {
  it("is the selected region while it exists", () => {
    expect(featuredRegion(["r1", "r2", "r3"], "r1")).toBe("r1");
  });
  it("is the newest region when none (or a removed one) is selected", () => {
    expect(featuredRegion(["r1", "r2"], null)).toBe("r2");
    expect(featuredRegion(["r1", "r2"], "r9")).toBe("r2");
  });
  it("is null without regions", () => {
    expect(featuredRegion([], null)).toBeNull();
    expect(featuredRegion([], "r1")).toBeNull();
  });
});

describe("containScale", () => {
  it("fits the crop's longer side relative to the box", () => {
    expect(containScale(200, 250, 100, 50)).toBe(2); // width-bound
    expect(containScale(200, 250, 26, 250)).toBe(1); // height-bound
  });
  it("is 0 before layout or for an empty crop", () => {
    expect(containScale(0, 250, 10, 10)).toBe(0);
    expect(containScale(200, 250, 0, 10)).toBe(0);
  });
});

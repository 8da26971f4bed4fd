import { describe, expect, it } from "vitest";
import { asImageKind, parseVirtualImages, shownImage, type VirtualKind } from "./imagekind";

const codes = (values: number[]) => new Uint8Array(new Uint16Array(values).buffer);
const record = (rows: number, cols: number, data: Uint8Array, extra: Record<string, unknown> = {}) => ({
  label: "virtual BF", unit: "counts", shape: [rows, cols], range: [10, 20], data: new DataView(data.buffer), ...extra,
});

describe("virtual images trait", () => {
  it("decodes each image's codes, range, label and unit", () => {
    const images = parseVirtualImages({ "virtual-bf": record(1, 2, codes([0, 65535])), icom: record(1, 2, codes([1, 2]), { unit: "rad", label: "iCoM" }) });
    expect([...images.keys()]).toEqual(["virtual-bf", "icom"]); // in the select's order
    const bf = images.get("virtual-bf")!;
    expect(Array.from(bf.frame.codes)).toEqual([0, 65535]);
    expect([bf.frame.rows, bf.frame.cols, bf.frame.lo, bf.frame.hi]).toEqual([1, 2, 10, 20]);
    expect(images.get("icom")!.unit).toBe("rad");
  });
  it("leaves out malformed entries and unknown names", () => {
    const images = parseVirtualImages({
      "virtual-bf": record(2, 2, codes([1, 2])), // 2 codes for 4 pixels
      dpc: { ...record(1, 1, codes([3])), range: [0, "x"] },
      "virtual-adf": record(1, 1, codes([3])),
      bogus: record(1, 1, codes([3])),
    });
    expect([...images.keys()]).toEqual(["virtual-adf"]);
    expect(parseVirtualImages(null).size).toBe(0);
  });
  it("reads the image trait, virtual BF when unknown", () => {
    expect(asImageKind("dpc")).toBe("dpc");
    expect(asImageKind("phase")).toBe("phase");
    expect(asImageKind("nonsense")).toBe("virtual-bf");
  });
});

describe("what the scan view paints", () => {
  const all = new Set<VirtualKind>(["virtual-bf", "virtual-adf", "icom", "dpc"]);
  it("the chosen image when it is there", () => {
    expect(shownImage("virtual-adf", false, all, null)).toBe("virtual-adf");
    expect(shownImage("virtual-adf", true, all, null)).toBe("virtual-adf");
    expect(shownImage("phase", true, all, "icom")).toBe("phase");
  });
  it("the phase chosen before its frame arrived: the last virtual image stays", () => {
    expect(shownImage("phase", false, all, "icom")).toBe("icom");
    expect(shownImage("phase", false, all, null)).toBe("virtual-bf");
    expect(shownImage("phase", false, new Set(), null)).toBeNull();
  });
  it("a virtual image chosen but not arrived: the phase if any, else nothing", () => {
    expect(shownImage("dpc", true, new Set(), null)).toBe("phase");
    expect(shownImage("dpc", false, new Set(), null)).toBeNull();
  });
});

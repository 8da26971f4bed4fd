import { describe, expect, it } from "vitest";
import { cancelsJob, cancelTitle, jobName } from "./cancelkey";

const esc = { key: "Escape", ctrlKey: false, metaKey: false, altKey: false };

describe("cancelsJob", () => {
  it("cancels on a plain Esc with the focus or the pointer on the widget", () => {
    expect(cancelsJob(esc, true, false, "fit")).toBe(true);
    expect(cancelsJob(esc, false, true, "map")).toBe(true);
  });
  it("does nothing elsewhere, with modifiers, other keys or no job", () => {
    expect(cancelsJob(esc, false, false, "fit")).toBe(false);
    expect(cancelsJob({ ...esc, ctrlKey: true }, true, true, "fit")).toBe(false);
    expect(cancelsJob({ ...esc, key: "c" }, true, true, "fit")).toBe(false);
    expect(cancelsJob(esc, true, true, "")).toBe(false);
  });
});

describe("cancelTitle and jobName", () => {
  it("names the job", () => {
    expect(cancelTitle("refine")).toContain("refine");
    expect(cancelTitle("")).toContain("nothing to cancel");
    expect(jobName("map")).toBe("map");
    expect(jobName(3)).toBe("");
  });
});

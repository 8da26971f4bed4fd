import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { isStale, LatestWins, Throttle } from "./latest";

describe("latest wins", () => {
  it("one request in flight, only the newest waiting one is sent after it", () => {
    const sent: [string, number][] = [];
    const lw = new LatestWins<string>((p, s) => sent.push([p, s]), 100);
    lw.request("a");
    lw.request("b");
    lw.request("c");
    lw.request("d");
    expect(sent).toEqual([["a", 101]]);
    lw.answered(101);
    expect(sent).toEqual([["a", 101], ["d", 102]]);
    lw.answered(102);
    expect(lw.busy).toBe(false);
    lw.request("e");
    expect(sent.at(-1)).toEqual(["e", 103]);
  });
  it("a reply for an older request does not release the slot", () => {
    const sent: number[] = [];
    const lw = new LatestWins<number>((_, s) => sent.push(s), 0);
    lw.request(1);
    lw.answered(1);
    lw.request(2);
    lw.request(3);
    lw.answered(1); // a late duplicate
    expect(sent).toEqual([1, 2]);
    lw.answered(2);
    expect(sent).toEqual([1, 2, 3]);
  });
  it("a request never answered stops blocking after staleMs", () => {
    let t = 0;
    const sent: number[] = [];
    const lw = new LatestWins<number>((p) => sent.push(p), 0, 1000, () => t);
    lw.request(1);
    lw.request(2);
    t = 500;
    lw.request(3);
    expect(sent).toEqual([1]);
    t = 1600;
    lw.request(4);
    expect(sent).toEqual([1, 4]);
  });
  it("keeps its seq ahead of replies to other views", () => {
    const seqs: number[] = [];
    const lw = new LatestWins<number>((_, s) => seqs.push(s), 10);
    lw.answered(500);
    lw.request(1);
    expect(seqs).toEqual([501]);
  });
  it("stale frames", () => {
    expect(isStale(4, 5)).toBe(true);
    expect(isStale(5, 5)).toBe(false);
    expect(isStale(6, 5)).toBe(false);
  });
});

describe("throttle", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());
  it("first call runs, the burst after it runs once with the newest argument", () => {
    const calls: number[] = [];
    const th = new Throttle<number>((x) => calls.push(x), 100, () => Date.now());
    th.call(1);
    th.call(2);
    th.call(3);
    expect(calls).toEqual([1]);
    vi.advanceTimersByTime(100);
    expect(calls).toEqual([1, 3]);
    th.call(4);
    th.flush();
    expect(calls).toEqual([1, 3, 4]);
    th.call(5);
    th.cancel();
    vi.advanceTimersByTime(500);
    expect(calls).toEqual([1, 3, 4]);
  });
});

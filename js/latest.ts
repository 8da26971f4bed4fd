// Latest-wins request flow: at most one request in flight plus the newest
// waiting one (older waiting ones are replaced, never sent), and a sequence
// number per request so replies for stale requests can be dropped.

export class LatestWins<T> {
  private inFlight: number | null = null;
  private sentAt = 0;
  private pending: T | null = null;
  private seq: number;

  /**
   * `send(payload, seq)` puts a request on the wire. `firstSeq` should exceed
   * any seq another view of the same model may have used (a timestamp does).
   * `staleMs`: an unanswered request stops blocking after this long.
   */
  constructor(
    private readonly send: (payload: T, seq: number) => void,
    firstSeq: number,
    private readonly staleMs = 3000,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.seq = firstSeq;
  }

  /** Ask for `payload`: sent now if nothing is in flight, else kept as the newest waiting. */
  request(payload: T): void {
    if (this.inFlight !== null && this.now() - this.sentAt > this.staleMs) this.inFlight = null;
    if (this.inFlight === null) this.dispatch(payload);
    else this.pending = payload;
  }

  /** A reply for `seq` came: release the slot if it answers the request in flight, send the waiting one. */
  answered(seq: number): void {
    if (seq >= this.seq) this.seq = seq; // another view went further: keep ahead of it
    if (this.inFlight === null || seq < this.inFlight) return;
    this.inFlight = null;
    const next = this.pending;
    this.pending = null;
    if (next !== null) this.dispatch(next);
  }

  get busy(): boolean {
    return this.inFlight !== null;
  }

  get lastSeq(): number {
    return this.seq;
  }

  private dispatch(payload: T): void {
    this.seq += 1;
    this.inFlight = this.seq;
    this.sentAt = this.now();
    this.send(payload, this.seq);
  }
}

/** Trailing throttle: runs `fn` with the newest argument at most every `ms`. */
export class Throttle<T> {
  private last = -Infinity;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private latest: T | null = null;

  constructor(
    private readonly fn: (arg: T) => void,
    private readonly ms: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  call(arg: T): void {
    this.latest = arg;
    const wait = this.last + this.ms - this.now();
    if (wait <= 0) this.flush();
    else if (this.timer === null) this.timer = setTimeout(() => this.flush(), wait);
  }

  /** Run the newest waiting call now (e.g. on release). */
  flush(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.latest === null) return;
    const arg = this.latest;
    this.latest = null;
    this.last = this.now();
    this.fn(arg);
  }

  cancel(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.latest = null;
  }
}

/** Frames older than the last painted one are dropped (equal seq: a frame Python sent by itself). */
export function isStale(seq: number, lastPainted: number): boolean {
  return seq < lastPainted;
}

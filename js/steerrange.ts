// Precise steering (docs/widget.md, "Steering"): each slider's range centred on the
// fitted value with a span that suits its parameter, widened by a value typed or shown
// outside it until "reset to fit" restores it; arrow keys step, Shift steps and drags
// at a tenth of that. Pure logic; steering.ts wires it to the inputs.
import type { ParamRow } from "./paramtable";

export interface SliderRange {
  min: number;
  max: number;
  step: number; // one shown digit (the arrow keys' step)
}

/** Shift divides steps and drag speed by this. */
export const FINE = 10;
/** The span covers at least this many 1-σ errors each side of the fitted value. */
export const ERROR_SPANS = 5;
/** PageUp/PageDown: this many steps. */
export const PAGE_STEPS = 10;

export const stepOf = (row: ParamRow): number => 10 ** -row.digits;
export const fineStep = (row: ParamRow): number => stepOf(row) / FINE;

/** `v` rounded to the fine step's decimals (keeps 0.1 + 0.2 from showing 0.30000000000000004). */
export function snap(row: ParamRow, v: number): number {
  return Number(v.toFixed(row.digits + 1));
}

const down = (v: number, step: number, row: ParamRow) => snap(row, Math.floor(v / step + 1e-9) * step);
const up = (v: number, step: number, row: ParamRow) => snap(row, Math.ceil(v / step - 1e-9) * step);

/**
 * The range a fitted value gets: `centre` ± max(span, ERROR_SPANS·error), at most half the
 * default box wide each side, not below 0 for a non-negative parameter, bounds on whole
 * steps. Without a span (rotation, higher orders) or a centre: the default box.
 */
export function homeRange(row: ParamRow, centre?: number | null, error?: number | null): SliderRange {
  const step = stepOf(row);
  if (row.span === null || centre === undefined || centre === null || !Number.isFinite(centre)) {
    return widened({ min: row.box[0], max: row.box[1], step }, centre ?? undefined, row);
  }
  const err = error !== undefined && error !== null && Number.isFinite(error) && error > 0 ? error : 0;
  const half = Math.min(Math.max(row.span, ERROR_SPANS * err), (row.box[1] - row.box[0]) / 2);
  let min = centre - half;
  const max = centre + half;
  if (row.non_negative) min = Math.max(0, min);
  return { min: down(min, step, row), max: up(max, step, row), step };
}

/** `range` grown (never shrunk) to hold `v`. */
export function widened(range: SliderRange, v: number | undefined, row: ParamRow): SliderRange {
  if (v === undefined || !Number.isFinite(v) || (v >= range.min && v <= range.max)) return range;
  return {
    min: Math.min(range.min, down(v, range.step, row)),
    max: Math.max(range.max, up(v, range.step, row)),
    step: range.step,
  };
}

/** The value a key moves the slider to (null: not a stepping key, the slider's own). */
export function keyStep(row: ParamRow, range: SliderRange, value: number, key: string, shift: boolean): number | null {
  const sign = key === "ArrowRight" || key === "ArrowUp" || key === "PageUp" ? 1
    : key === "ArrowLeft" || key === "ArrowDown" || key === "PageDown" ? -1 : 0;
  if (sign === 0) return null;
  const steps = key.startsWith("Page") ? PAGE_STEPS : 1;
  const delta = (sign * steps * range.step) / (shift ? FINE : 1);
  return clamp(snap(row, value + delta), range);
}

export function clamp(v: number, range: SliderRange): number {
  return Math.min(range.max, Math.max(range.min, v));
}

/**
 * A slider drag's gearing: the browser maps the pointer to a raw value; with Shift the
 * value moves a tenth as fast from where it was. Pressing or releasing Shift mid-drag
 * re-anchors, so the value never jumps; a drag started without Shift follows the pointer.
 */
export class Gearing {
  private current = 0;
  private anchored = false;
  private fine = false;
  private raw0 = 0;
  private value0 = 0;

  /** A drag starts from `value`. */
  start(value: number): void {
    this.current = value;
    this.anchored = false;
  }

  /** The value for the browser's `raw` slider value with Shift held (`fine`) or not. */
  map(raw: number, fine: boolean): number {
    if (!this.anchored) {
      this.anchored = true;
      this.fine = fine;
      this.raw0 = raw;
      this.value0 = fine ? this.current : raw;
    } else if (fine !== this.fine) {
      this.fine = fine;
      this.raw0 = raw;
      this.value0 = this.current;
    }
    this.current = this.value0 + (raw - this.raw0) / (fine ? FINE : 1);
    return this.current;
  }
}

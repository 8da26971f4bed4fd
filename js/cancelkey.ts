// When the cancel applies (pure, for the cancel button and Esc in cancel.ts): Esc
// stops the running fit, refinement or map while the widget has the focus or the
// pointer; the job names come from Python (`cancellable`, `cancelled` traits).

/** The parts of a KeyboardEvent that decide. */
export interface KeyLike {
  key: string;
  ctrlKey: boolean;
  metaKey: boolean;
  altKey: boolean;
}

/** Whether this key press asks to cancel `job` ("" when no cancellable job runs): a
 * plain Esc, with the focus in the widget or the pointer over it. */
export function cancelsJob(e: KeyLike, focusInside: boolean, pointerOver: boolean, job: string): boolean {
  if (job === "" || e.key !== "Escape" || e.ctrlKey || e.metaKey || e.altKey) return false;
  return focusInside || pointerOver;
}

/** The cancel button's tooltip. */
export function cancelTitle(job: string): string {
  return job === "" ? "nothing to cancel: no fit, refinement or map runs" : `stop the running ${job}, keeping the earlier results (Esc)`;
}

/** A job name from the wire ("" for anything else). */
export function jobName(x: unknown): string {
  return typeof x === "string" ? x : "";
}

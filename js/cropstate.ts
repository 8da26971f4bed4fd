// Which crop a region panel paints, and what its status line says (pure: unit tested).
//
// During a live drag Python publishes every fit newer than the last one it sent,
// each marked with how many edits it trails the pointer (`behind`). Messages can
// still reach a panel out of order (a re-render asks for every crop again), so the
// panel keeps the generation of the newest crop it has taken and paints only newer.

/** The edit a crop was fitted for and how many edits it trailed the latest when sent. */
export interface CropStamp {
  generation: number;
  behind: number;
}

/** Paint `incoming` over the crop of edit `shown` (-1: none yet)? Only a newer edit's:
 * an older one would put a stale fit over a newer one, the same one is a re-send. */
export function acceptCrop(shown: number, incoming: number): boolean {
  return incoming > shown;
}

/** The panel's status line: the status, an error's text, or while a fit runs the
 * step it is at (crystal mode's, seconds each on a CPU) and how far the crop on screen
 * trails the region's latest edit. */
export function cropStatusText(status: string, error: string, behind: number, step = ""): string {
  if (status === "error") return `error: ${error}`;
  if (status !== "fitting") return status;
  const notes = [step, behind > 0 ? `crop ${behind} edit${behind === 1 ? "" : "s"} behind` : ""].filter((n) => n !== "");
  return notes.length > 0 ? `fitting (${notes.join(", ")})` : "fitting";
}

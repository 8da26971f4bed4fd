// Fit progress ("fit progress", role progressbar) while a fit runs: trials
// done of total, then Newton, then the reconstruction, with the elapsed time;
// after it, the per-stage timings of the fit.
import { element } from "./dom";
import type { Progress } from "./model";

const STAGE_TEXT: Record<string, string> = { search: "trials", newton: "Newton", reconstruct: "reconstruction", map: "map tiles" };

/** "branch0_search_s" -> "branch0 search" (the unit is shown with the value). */
function stageName(key: string): string {
  return key.replace(/_s$/, "").replace(/_/g, " ");
}

export class ProgressView {
  readonly el: HTMLElement;
  readonly bar: HTMLElement; // placed over the scan image (imageview.ts)
  private fill: HTMLElement;
  private text: HTMLElement;
  private timings: HTMLElement;

  constructor() {
    this.el = element("div", "livessb-progress-box");
    this.bar = element("div", "livessb-progress", "fit progress");
    this.bar.setAttribute("role", "progressbar");
    this.bar.setAttribute("aria-valuemin", "0");
    this.fill = element("div", "livessb-progress-fill");
    this.text = element("span", "livessb-progress-text");
    this.bar.append(this.fill, this.text);
    this.bar.hidden = true;
    this.timings = element("div", "livessb-timings", "stage timings");
    this.el.append(this.bar, this.timings);
  }

  setProgress(p: Progress): void {
    const running = p.stage !== "";
    this.bar.hidden = !running;
    this.bar.dataset.stage = p.stage;
    if (!running) return;
    const total = p.total > 0 ? p.total : 1;
    const done = Math.min(p.done, total);
    this.bar.setAttribute("aria-valuemax", String(total));
    this.bar.setAttribute("aria-valuenow", String(done));
    const what = STAGE_TEXT[p.stage] ?? p.stage;
    const text = `${what} ${done}/${total}`;
    this.bar.setAttribute("aria-valuetext", `${text}, ${p.elapsed_s.toFixed(1)} s`);
    this.fill.style.width = `${((100 * done) / total).toFixed(1)}%`;
    this.text.textContent = `${text} · ${p.elapsed_s.toFixed(1)} s`;
  }

  setTimings(timings: Record<string, number> | undefined): void {
    const entries = Object.entries(timings ?? {}).filter(([, v]) => typeof v === "number");
    this.timings.textContent = entries.length
      ? "timings: " + entries.map(([k, v]) => `${stageName(k)} ${v < 1 ? `${(1000 * v).toFixed(0)} ms` : `${v.toFixed(2)} s`}`).join(", ")
      : "";
  }
}

// The scale bar element (aria-label "scale bar"): a bar and its text, laid
// over an image. Shared by the scan view and every crop panel.
import { element } from "./dom";
import { chooseScaleBar } from "./scalebar";

export class ScaleBarView {
  readonly el: HTMLElement;
  private bar: HTMLElement;
  private text: HTMLElement;

  constructor() {
    this.el = element("div", "livessb-scalebar", "scale bar");
    this.bar = element("div", "livessb-scalebar-bar");
    this.text = element("span", "livessb-scalebar-text");
    this.el.append(this.bar, this.text);
    this.el.hidden = true;
  }

  /** `pxPerA`: CSS px per Å on screen; `maxPx`: the longest bar allowed. */
  update(pxPerA: number, maxPx: number): void {
    const bar = chooseScaleBar(pxPerA, maxPx);
    this.el.hidden = bar === null;
    if (!bar) return;
    this.bar.style.width = `${bar.px.toFixed(1)}px`;
    this.text.textContent = bar.text;
    this.el.dataset.lengthA = String(bar.lengthA);
  }
}

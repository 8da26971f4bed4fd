// The trials list ("trials": items "trial <n>") and the pins panel ("pin",
// "pins", "export pins", "export TIFF").
import { button, element } from "./dom";
import { fmt } from "./model";
import type { ParamRow } from "./paramtable";
import { formatParam, jointRows } from "./paramtable";
import type { Pin } from "./pins";
import type { Trial } from "./trials";

function paramsText(table: readonly ParamRow[], params: Record<string, number>): string {
  return jointRows(table)
    .filter((r) => typeof params[r.name] === "number")
    .map((r) => `${r.label} ${formatParam(r, params[r.name])}`)
    .join(", ");
}

export class TrialsList {
  readonly el: HTMLElement;
  private caption: HTMLElement;
  private list: HTMLElement;
  private items: HTMLButtonElement[] = [];

  constructor(private readonly onPick: (index: number) => void) {
    this.el = element("div", "livessb-trials-box");
    this.caption = element("div", "livessb-caption");
    this.list = element("ul", "livessb-trials", "trials");
    this.el.append(this.caption, this.list);
  }

  set(trials: readonly Trial[], table: readonly ParamRow[], caption: string, active: number): void {
    this.caption.textContent = trials.length ? `${caption}: best ${trials.length} trials (←/→)` : `${caption}: no trials yet`;
    this.list.replaceChildren();
    this.items = trials.map((t, i) => {
      const li = element("li");
      const b = button("", `trial ${t.n}`);
      b.dataset.index = String(i);
      b.dataset.loss = String(t.loss);
      b.textContent = `#${t.n}  loss ${fmt(t.loss, 5)}  ${paramsText(table, t.params)}`;
      b.title = b.textContent; // one line each: the whole text on hover
      b.addEventListener("click", () => this.onPick(i));
      li.append(b);
      this.list.append(li);
      return b;
    });
    this.setActive(active);
  }

  setActive(index: number): void {
    this.items.forEach((b, i) => {
      b.classList.toggle("active", i === index);
      b.setAttribute("aria-current", String(i === index));
    });
    this.items[index]?.scrollIntoView?.({ block: "nearest" });
  }
}

export interface PinsCallbacks {
  onPin: () => void;
  onShow: (pin: Pin) => void;
  onRemove: (name: string) => void;
  onExportPins: (dir: string) => void;
  onExportTiff: (path: string) => void;
}

export class PinsPanel {
  readonly el: HTMLElement;
  readonly pinButton: HTMLButtonElement;
  readonly exportPinsButton: HTMLButtonElement;
  readonly exportTiffButton: HTMLButtonElement;
  readonly dirInput: HTMLInputElement;
  readonly result: HTMLElement;
  private list: HTMLElement;

  constructor(private readonly cb: PinsCallbacks) {
    this.el = element("div", "livessb-pins-box");
    this.pinButton = button("pin (P)", "pin");
    this.list = element("ul", "livessb-pins", "pins");
    this.dirInput = element("input", "", "export folder");
    this.dirInput.type = "text";
    this.dirInput.value = "."; // the notebook's folder: it exists (livessb creates no folders)
    this.dirInput.title = "an existing folder, relative to the notebook's or absolute";
    this.exportPinsButton = button("export pins", "export pins");
    this.exportTiffButton = button("export TIFF", "export TIFF");
    this.result = element("div", "livessb-export-result", "export result");
    this.result.setAttribute("role", "status");
    this.pinButton.addEventListener("click", () => cb.onPin());
    this.exportPinsButton.addEventListener("click", () => cb.onExportPins(this.dir()));
    this.exportTiffButton.addEventListener("click", () => cb.onExportTiff(`${this.dir()}/reconstruction.tif`));
    const row = element("div", "livessb-row");
    row.append(this.pinButton, this.dirInput, this.exportPinsButton, this.exportTiffButton);
    this.el.append(row, this.list, this.result);
  }

  dir(): string {
    return this.dirInput.value.trim() || ".";
  }

  set(pins: readonly Pin[], table: readonly ParamRow[]): void {
    this.list.replaceChildren();
    this.exportPinsButton.disabled = pins.length === 0;
    for (const pin of pins) {
      const li = element("li");
      li.dataset.pin = pin.name;
      const show = button(`${pin.name}: ${paramsText(table, pin.params)}, loss ${fmt(pin.loss, 5)}`, `show ${pin.name}`);
      show.addEventListener("click", () => this.cb.onShow(pin));
      const remove = button("×", `remove ${pin.name}`);
      remove.addEventListener("click", () => this.cb.onRemove(pin.name));
      li.append(show, remove);
      this.list.append(li);
    }
  }

  setResult(text: string, error: boolean): void {
    this.result.textContent = text;
    this.result.classList.toggle("error", error);
  }
}

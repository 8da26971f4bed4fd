// The cancel button (`aria-label="cancel"`) and Esc: send {type: "cancel"} while a
// fit, refinement or map runs (Python's `cancellable` names it); the root carries
// `data-cancelled` = the name of the job last cancelled (Python's `cancelled`).
// Esc counts with the focus inside the widget or the pointer over it (then the event
// also goes on to the page: it is not only ours).
import { cancelsJob, cancelTitle, jobName } from "./cancelkey";
import { button, element } from "./dom";
import type { Model } from "./model";

export class CancelControl {
  readonly el: HTMLElement;
  readonly button: HTMLButtonElement;
  private job = "";
  private pointerOver = false;
  private readonly onDocKey: (e: KeyboardEvent) => void;
  private readonly onEnter = () => (this.pointerOver = true);
  private readonly onLeave = () => (this.pointerOver = false);

  private readonly onTraits = () => {
    this.setJob(jobName(this.model.get("cancellable")));
    this.setCancelled(jobName(this.model.get("cancelled")));
  };

  constructor(private readonly root: HTMLElement, private readonly model: Model) {
    this.el = element("div", "livessb-cancel");
    this.button = button("Cancel", "cancel");
    this.button.addEventListener("click", () => this.cancel());
    this.el.append(this.button);
    this.onTraits();
    model.on("change:cancellable", this.onTraits);
    model.on("change:cancelled", this.onTraits);
    this.onDocKey = (e) => {
      const inside = e.target instanceof Node && root.contains(e.target);
      if (cancelsJob(e, inside, this.pointerOver, this.job)) this.cancel();
    };
    root.addEventListener("pointerenter", this.onEnter);
    root.addEventListener("pointerleave", this.onLeave);
    // capture: the widget's own key handler stops Esc's propagation at the root
    document.addEventListener("keydown", this.onDocKey, true);
  }

  /** The job a cancel would stop ("" none: the button is disabled). */
  setJob(job: string): void {
    this.job = job;
    this.button.disabled = job === "";
    this.button.title = cancelTitle(job);
    if (job !== "") this.button.dataset.job = job;
    else delete this.button.dataset.job;
  }

  /** The job last cancelled ("" none since): the root's `data-cancelled`. */
  setCancelled(name: string): void {
    if (name !== "") this.root.dataset.cancelled = name;
    else delete this.root.dataset.cancelled;
  }

  private cancel(): void {
    // A second press while the job stops is a no-op in Python, which also disables
    // the button (`cancellable` ""): the state stays Python's.
    if (this.job !== "") this.model.send({ type: "cancel" });
  }

  dispose(): void {
    this.model.off("change:cancellable", this.onTraits);
    this.model.off("change:cancelled", this.onTraits);
    this.root.removeEventListener("pointerenter", this.onEnter);
    this.root.removeEventListener("pointerleave", this.onLeave);
    document.removeEventListener("keydown", this.onDocKey, true);
  }
}

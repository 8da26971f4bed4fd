// Element construction for the widget's DOM: class names and accessible names are the
// selectors of the DOM contract (SPEC), so they are set in one place.

/** A new `tag` element with an optional class and aria-label. */
export function element<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className = "",
  label = "",
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (label) node.setAttribute("aria-label", label);
  return node;
}

/** A plain (non-submit) button with its text and aria-label. */
export function button(text: string, label: string): HTMLButtonElement {
  const node = element("button", "", label);
  node.type = "button";
  node.textContent = text;
  return node;
}

/** Run `apply` when a field's value is committed: Enter, or the change event (focus
 *  leaving it, a spinner click); not on every keystroke. */
export function onCommit(input: HTMLInputElement, apply: () => void): void {
  input.addEventListener("change", apply);
  input.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.isComposing) apply();
  });
}

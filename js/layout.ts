// The widget's layout: three columns that fit a 1600×1000 window in JupyterLab
// (layout.css), narrowing to two and then one in a narrower cell.
//   main:    the scan image with its colour bar beside it (the loss, scale bar and fit
//            progress over the image), the image's controls (virtual image, colormap,
//            view, reset view, FFT, line profile; contrast and histogram), the
//            measurement tools (FFT, profile plot) when open;
//   lists:   the trials and pins, under the main column (at the bottom when narrower);
//   side:    the steering parameters, the status (badge, cancel, full-field readout,
//            messages, stage timings), the calibration save, the map row (fit map,
//            parameter, legend), then room for panels mounted later (the diffraction
//            pattern: `layout.side.append(panel.el)`);
//   gallery: the regions (delete, live), the featured crop large, the others as thumbnails.
// Only elements are placed here; each part keeps its own behaviour.
import { element } from "./dom";

export interface LayoutParts {
  stage: HTMLElement; // the scan view (canvas and its overlays)
  colourBar: HTMLElement;
  viewRow: HTMLElement; // colormap, view, reset view, FFT
  imageControls: HTMLElement[]; // put before the view row's own controls (virtual image)
  viewTools: HTMLElement[]; // put after them (line profile)
  contrastRow: HTMLElement;
  mapRow: HTMLElement;
  tools: HTMLElement[]; // FFT panel, line profile panel
  lists: HTMLElement[]; // trials, pins
  steering: HTMLElement;
  status: HTMLElement;
  statusHeader: HTMLElement; // the status badge's row: the cancel button joins it
  cancel: HTMLElement;
  timings: HTMLElement;
  save: HTMLElement;
  regionTools: HTMLElement;
  crops: HTMLElement;
}

export interface Layout {
  el: HTMLElement;
  main: HTMLElement;
  side: HTMLElement;
  gallery: HTMLElement;
}

export function buildLayout(p: LayoutParts): Layout {
  const imageRow = element("div", "livessb-imagerow");
  imageRow.append(p.stage, p.colourBar);
  p.viewRow.prepend(...p.imageControls);
  p.viewRow.append(...p.viewTools);
  const tools = element("div", "livessb-tools");
  tools.append(...p.tools);
  const main = element("div", "livessb-main");
  main.append(imageRow, p.viewRow, p.contrastRow, tools);
  const lists = element("div", "livessb-lists");
  lists.append(...p.lists);

  p.statusHeader.append(p.cancel);
  const state = element("div", "livessb-state");
  state.append(p.status, p.timings, p.save, p.mapRow);
  const side = element("div", "livessb-side");
  side.append(p.steering, state);

  const caption = element("div", "livessb-caption");
  caption.textContent = "Regions";
  const header = element("div", "livessb-gallery-header");
  header.append(caption, p.regionTools);
  const gallery = element("div", "livessb-gallery");
  gallery.append(header, p.crops);

  const el = element("div", "livessb-layout");
  el.append(main, lists, side, gallery);
  return { el, main, side, gallery };
}

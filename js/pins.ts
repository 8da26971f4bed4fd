// Pins: snapshots of the parameters and the view, and the export_pins payload.
import type { ColormapName } from "./colormaps";
import type { Params } from "./model";

export type ViewKind = "phase" | "amplitude";

export interface Pin {
  name: string;
  params: Params;
  rotation_deg: number | null;
  loss: number | null;
  view: ViewKind;
  colormap: ColormapName;
  contrast: [number, number];
}

/** Append a pin named pin1, pin2, … (the smallest number not in use). */
export function addPin(pins: readonly Pin[], pin: Omit<Pin, "name">): Pin[] {
  const used = new Set(pins.map((p) => p.name));
  let k = 1;
  while (used.has(`pin${k}`)) k++;
  return [...pins, { ...pin, params: { ...pin.params }, contrast: [pin.contrast[0], pin.contrast[1]], name: `pin${k}` }];
}

export function removePin(pins: readonly Pin[], name: string): Pin[] {
  return pins.filter((p) => p.name !== name);
}

export interface ExportPinsMessage {
  type: "export_pins";
  dir: string;
  pins: { name: string; params: Params; rotation_deg?: number; view: ViewKind; colormap: ColormapName; contrast: [number, number] }[];
}

/** The export_pins message of docs/widget-protocol.md. */
export function exportPinsMessage(dir: string, pins: readonly Pin[]): ExportPinsMessage {
  return {
    type: "export_pins",
    dir,
    pins: pins.map((p) => ({
      name: p.name,
      params: { ...p.params },
      ...(p.rotation_deg === null ? {} : { rotation_deg: p.rotation_deg }),
      view: p.view,
      colormap: p.colormap,
      contrast: [p.contrast[0], p.contrast[1]],
    })),
  };
}

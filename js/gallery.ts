// The region gallery's choices (pure: unit tested). One region is shown large
// (the selected one, else the newest), the others as thumbnails that select
// theirs on a click; the large crop's scale bar follows the size it is shown at.

/** The region shown large: the selected one, else the newest (last drawn), null with none. */
export function featuredRegion(ids: readonly string[], selected: string | null): string | null {
  if (selected !== null && ids.includes(selected)) return selected;
  return ids.length ? ids[ids.length - 1] : null;
}

/** Screen px per crop px of a `w`×`h` crop shown `object-fit: contain` in a `boxW`×`boxH`
 * box (0 while either is not laid out). */
export function containScale(boxW: number, boxH: number, w: number, h: number): number {
  if (!(boxW > 0 && boxH > 0 && w > 0 && h > 0)) return 0;
  return Math.min(boxW / w, boxH / h);
}

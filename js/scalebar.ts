// Scale bar: the longest round length (1, 2 or 5 × 10^k Å) that fits in a
// target on-screen width, from the sampling of the pixels shown, with its text
// in Å below 1 nm and in nm from 1 nm up.

export interface ScaleBar {
  lengthA: number; // physical length in Å
  px: number; // on-screen length in CSS px
  text: string; // e.g. "5 Å", "1 nm", "20 nm"
}

const MANTISSAS = [5, 2, 1];

/** Plain decimal text of a round number (no exponent, no float noise). */
function roundText(x: number): string {
  return String(Number(x.toPrecision(6)));
}

export function scaleBarText(lengthA: number): string {
  return lengthA >= 10 ? `${roundText(lengthA / 10)} nm` : `${roundText(lengthA)} Å`;
}

/**
 * `pxPerA`: on-screen CSS px per Å (display px per image px / Å per image px).
 * `maxPx`: the longest bar allowed. Returns null if no bar can be drawn.
 */
export function chooseScaleBar(pxPerA: number, maxPx: number): ScaleBar | null {
  if (!(pxPerA > 0) || !(maxPx > 0) || !Number.isFinite(pxPerA)) return null;
  const maxA = maxPx / pxPerA;
  let k = Math.floor(Math.log10(maxA));
  for (let guard = 0; guard < 3; guard++, k--) {
    for (const m of MANTISSAS) {
      const lengthA = Number((m * 10 ** k).toPrecision(12));
      if (lengthA <= maxA * (1 + 1e-12)) return { lengthA, px: lengthA * pxPerA, text: scaleBarText(lengthA) };
    }
  }
  return null;
}

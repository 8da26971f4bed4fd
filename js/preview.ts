// Live steering's frame flow: preview requests (latest wins, one in flight),
// frames received (stale ones dropped), painted with the browser's colormap
// and contrast, the root's data-preview-* attributes, the loss beside the
// image, and the FFT of what is on screen.
import type { FrameDisplay } from "./display";
import type { FFTView } from "./fftview";
import { decodeCodes } from "./frame";
import { isStale, LatestWins } from "./latest";
import { parseFrameMessage, toBytes, type Model, type Params } from "./model";
import type { ViewKind } from "./pins";
import type { ScanView } from "./scanview";
import type { SteeringPanel } from "./steering";

interface PreviewRequest {
  params: Params;
  rotation_deg: number | null;
  view: ViewKind;
  draft: boolean; // a slider drag's frame: no upsampling (the release asks for the full one)
}

export class PreviewController {
  view: ViewKind = "phase";
  private lastPainted = -Infinity;
  private painted = 0;
  private fftKey = "";
  private readonly requests: LatestWins<PreviewRequest>;
  /** Called on every request: the scan view goes back to the reconstruction (imageview.ts). */
  onRequest: () => void = () => {};

  constructor(
    model: Model,
    private readonly root: HTMLElement,
    private readonly scan: ScanView,
    private readonly steering: SteeringPanel,
    private readonly display: FrameDisplay,
    private readonly fft: FFTView,
    private readonly notice: (text: string) => void,
  ) {
    // seqs start at a timestamp: above those of any earlier view of this model
    this.requests = new LatestWins<PreviewRequest>((req, seq) => {
      model.send({ type: "preview", seq, params: req.params, view: req.view, draft: req.draft, ...rotation(req.rotation_deg) });
    }, Date.now());
    root.dataset.previewFrame = "0";
  }

  /** Ask for a frame of the controls' current values (``draft``: while a slider is dragged). */
  request(draft = false): void {
    this.onRequest();
    this.requests.request({ params: this.steering.values(), rotation_deg: this.steering.rotationDeg(), view: this.view, draft });
  }

  /** Parameters of the frame on screen (else of the controls). */
  shownParams(): Params {
    return { ...(this.display.meta?.params ?? this.steering.values()) };
  }

  /** `{rotation_deg}` of the controls, or nothing while unknown. */
  rotationField(): { rotation_deg?: number } {
    return rotation(this.steering.rotationDeg());
  }

  /** Handle a `frame` message; false if the message is something else. */
  receive(msg: unknown, buffers: DataView[]): boolean {
    const meta = parseFrameMessage(msg);
    if (!meta) return false;
    this.requests.answered(meta.seq);
    const bytes = buffers?.length ? toBytes(buffers[0]) : null;
    if (!bytes || isStale(meta.seq, this.lastPainted)) return true;
    try {
      const t0 = performance.now();
      const codes = decodeCodes(bytes, meta.shape[0], meta.shape[1]);
      this.lastPainted = meta.seq;
      this.display.show({ codes, rows: meta.shape[0], cols: meta.shape[1], lo: meta.range[0], hi: meta.range[1] }, meta);
      this.painted += 1;
      this.root.dataset.previewParams = JSON.stringify(meta.params);
      this.root.dataset.previewFrame = String(this.painted);
      this.root.dataset.previewSeq = String(meta.seq);
      this.root.dataset.previewShape = `${meta.shape[0]}x${meta.shape[1]}`;
      this.root.dataset.previewView = meta.view;
      this.root.dataset.previewDraft = meta.draft ? "1" : "0";
      this.scan.setLoss(meta.loss);
      this.updateFFT();
      this.root.dataset.paintMs = (performance.now() - t0).toFixed(2); // browser cost of the last frame
    } catch (err) {
      this.notice(`cannot show frame: ${String(err)}`);
    }
    return true;
  }

  /** Show or hide the FFT (computed at once when shown). */
  showFFT(shown: boolean): void {
    this.fft.show(shown);
    this.fftKey = "";
    this.updateFFT();
  }

  /** FFT of the frame's pixels on screen (recomputed when the frame or the view changed). */
  updateFFT(): void {
    const f = this.display.frame;
    const sampling = this.display.meta?.sampling_A;
    if (!this.fft.shown || !f || !sampling) return;
    const v = this.scan.visible();
    const key = `${this.painted}:${v.r0},${v.r1},${v.c0},${v.c1}`;
    if (key === this.fftKey) return;
    const values = this.display.frameValues();
    if (!values) return;
    this.fftKey = key;
    const fr = f.rows / this.scan.scanShape.rows; // frame px per scan px
    const fc = f.cols / this.scan.scanShape.cols;
    const r0 = Math.floor(v.r0 * fr);
    const c0 = Math.floor(v.c0 * fc);
    const h = Math.min(f.rows, Math.ceil(v.r1 * fr)) - r0;
    const w = Math.min(f.cols, Math.ceil(v.c1 * fc)) - c0;
    this.fft.update({ values, cols: f.cols, r0, c0, h, w, samplingA: sampling });
  }
}

function rotation(deg: number | null): { rotation_deg?: number } {
  return deg === null ? {} : { rotation_deg: deg };
}

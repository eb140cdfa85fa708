/**
 * Watch it learn: the videos a run's `evaluation_every` records as it trains, as a filmstrip
 * with a step slider. Moving the slider (or clicking a frame) plays that checkpoint's episode
 * and marks its step on the return curve, so what the policy does is seen next to how it scores.
 * It follows the newest frame until the user picks another.
 */

import { ApiError, apiToken } from "../../api/client";
import type { Evaluation } from "../../api/types";
import { fmtNumber, fmtSteps } from "../../data/format";
import { clear, el, setText } from "../../ui/dom";

/** At most this many thumbnails (evenly spread, the selected one always among them). */
export const MAX_THUMBS = 10;

/** Indices of the thumbnails to show out of `n` frames: first, last, selected, evenly between. */
export function thumbIndices(n: number, selected: number, max = MAX_THUMBS): number[] {
  if (n <= max) return [...Array(n).keys()];
  const picks = new Set<number>([0, n - 1, selected]);
  for (let k = 1; picks.size < max && k < max - 1; k++) picks.add(Math.round((k * (n - 1)) / (max - 1)));
  return [...picks].sort((a, b) => a - b);
}

function caption(e: Evaluation): string {
  const ret = e.return_mean === null ? "" : ` · return ${fmtNumber(e.return_mean)}`;
  return `${fmtSteps(e.checkpoint_env_steps)} steps · iteration ${e.checkpoint_iteration}${ret}`;
}

export class Filmstrip {
  readonly root: HTMLElement;
  private readonly slider = el("input", { type: "range", min: 0, max: 0, step: 1, value: 0, "data-role": "filmstrip-slider", "aria-label": "Checkpoint" });
  private readonly label = el("p", { class: "filmstrip-label", "data-role": "filmstrip-label" });
  private readonly stage = el("div", { class: "filmstrip-stage", "data-role": "filmstrip-stage" });
  private readonly thumbs = el("div", { class: "filmstrip-thumbs", "data-role": "filmstrip-thumbs" });
  private readonly hint = el("p", { class: "muted" });
  private frames: Evaluation[] = [];
  private index = -1;
  /** True once the user picked a frame: new frames no longer move the selection. */
  private pinned = false;
  private stageKey = "";
  private thumbKey = "";
  private readonly blobs = new Map<string, Promise<string>>();
  private closed = false;

  constructor(
    private readonly onStep: (step: number | null) => void,
    private readonly onError: (e: unknown) => void,
  ) {
    this.slider.addEventListener("input", () => this.pick(Number(this.slider.value)));
    this.root = el(
      "section",
      { class: "panel filmstrip", "data-role": "filmstrip", hidden: true },
      el("h2", {}, "Watch it learn"),
      this.hint,
      el("div", { class: "filmstrip-body" }, this.stage, el("div", { class: "filmstrip-side" }, this.slider, this.label, this.thumbs)),
    );
  }

  /** The experiment's `evaluation_every` (0: off): without frames, say when the first comes. */
  configure(every: number, checkpointEvery: number): void {
    if (every <= 0) {
      setText(this.hint, "");
      if (!this.frames.length) this.root.hidden = true;
      return;
    }
    this.root.hidden = false;
    const at = checkpointEvery > 0 ? `every ${every * checkpointEvery} iterations` : "at the end of the run";
    setText(this.hint, this.frames.length ? "" : `A video of the policy is recorded ${at} and at the end; the first appears here once it is recorded.`);
  }

  /** All of the experiment's evaluations (the panel's rows): the scheduled ones are frames. */
  update(all: Evaluation[]): void {
    const frames = all.filter((e) => e.scheduled).sort((a, b) => a.checkpoint_env_steps - b.checkpoint_env_steps || a.id - b.id);
    const selectedId = this.frames[this.index]?.id;
    this.frames = frames;
    if (!frames.length) {
      this.index = -1;
      this.onStep(null);
      return;
    }
    this.root.hidden = false;
    setText(this.hint, "");
    const kept = frames.findIndex((e) => e.id === selectedId);
    this.index = this.pinned && kept >= 0 ? kept : this.newest();
    this.render();
  }

  close(): void {
    this.closed = true;
    for (const p of this.blobs.values()) void p.then((u) => u.startsWith("blob:") && URL.revokeObjectURL(u));
  }

  /** The newest frame with a video (else the newest): what a live run shows. */
  private newest(): number {
    for (let i = this.frames.length - 1; i >= 0; i--) if (this.frames[i].video) return i;
    return this.frames.length - 1;
  }

  private pick(i: number): void {
    if (i < 0 || i >= this.frames.length) return;
    this.pinned = i !== this.frames.length - 1; // back on the newest: follow again
    this.index = i;
    this.render();
  }

  private render(): void {
    const e = this.frames[this.index];
    this.slider.max = String(this.frames.length - 1);
    this.slider.value = String(this.index);
    this.slider.disabled = this.frames.length < 2;
    setText(this.label, `${this.index + 1} of ${this.frames.length}: ${caption(e)}`);
    this.onStep(e.checkpoint_env_steps);
    this.renderStage(e);
    this.renderThumbs();
  }

  private renderStage(e: Evaluation): void {
    const key = `${e.id}:${e.status}:${e.video?.url ?? ""}`;
    if (key === this.stageKey) return;
    this.stageKey = key;
    clear(this.stage);
    this.stage.dataset.evaluation = String(e.id);
    if (!e.video) {
      const why = e.status === "failed" ? `failed: ${e.error ?? e.reason}` : e.video_message ? `no video: ${e.video_message}` : `${e.status}: the video appears once it is recorded`;
      this.stage.append(el("p", { class: "muted filmstrip-wait" }, `Evaluation ${e.id} ${why}`));
      return;
    }
    const video = el("video", { controls: true, muted: true, autoplay: true, loop: true, playsinline: true, preload: "auto", width: e.video.width, "data-role": "filmstrip-video", "data-evaluation": e.id });
    this.stage.append(video);
    void this.src(e.video.url).then((u) => {
      if (!this.closed && this.stage.contains(video)) video.src = u;
    }, this.onError);
  }

  private renderThumbs(): void {
    const shown = thumbIndices(this.frames.length, this.index);
    const key = shown.map((i) => `${this.frames[i].id}:${this.frames[i].video ? 1 : 0}:${i === this.index ? 1 : 0}`).join(",");
    if (key === this.thumbKey) return;
    this.thumbKey = key;
    clear(this.thumbs);
    for (const i of shown) {
      const e = this.frames[i];
      const face = e.video ? el("video", { muted: true, preload: "metadata", playsinline: true }) : el("span", { class: "thumb-wait" }, e.status);
      if (e.video && face instanceof HTMLVideoElement) {
        void this.src(e.video.url).then((u) => {
          if (!this.closed) face.src = `${u}#t=0.1`;
        }, this.onError);
      }
      this.thumbs.append(
        el(
          "button",
          { type: "button", class: i === this.index ? "thumb selected" : "thumb", "data-frame": i, title: caption(e), onclick: () => this.pick(i) },
          face,
          el("span", { class: "thumb-step" }, fmtSteps(e.checkpoint_env_steps)),
        ),
      );
    }
  }

  /** Plain URL (Range requests); with an API token, a blob fetched with it (cached). */
  private src(url: string): Promise<string> {
    const token = apiToken();
    if (!token) return Promise.resolve(url);
    let p = this.blobs.get(url);
    if (!p) {
      p = fetch(url, { headers: { Authorization: `Bearer ${token}` } }).then(async (resp) => {
        if (!resp.ok) throw new ApiError(resp.status, `http_${resp.status}`, `video download failed (${resp.status})`);
        return URL.createObjectURL(await resp.blob());
      });
      this.blobs.set(url, p);
    }
    return p;
  }
}

/**
 * Evaluations on the experiment page: the form an "Evaluate" button of a checkpoint row opens,
 * the experiment's evaluations with live progress (`evaluation` stream messages), and the
 * selected one's video beside its return distribution.
 */

import { api, ApiError, apiToken } from "../../api/client";
import type { Checkpoint, Evaluation, EvaluationDetail } from "../../api/types";
import { fmtBytes, fmtNumber, fmtSteps } from "../../data/format";
import { clear, el, setText } from "../../ui/dom";
import { returnStrip } from "../../ui/returnStrip";
import { statusBadge } from "../../ui/status";

const FINISHED = new Set(["succeeded", "failed"]);

export class EvaluationsPanel {
  readonly root: HTMLElement;
  private readonly form = el("form", { class: "eval-form", hidden: true, novalidate: true });
  private readonly list = el("tbody");
  private readonly empty = el("p", { class: "muted" }, "No evaluation yet: use Evaluate on a checkpoint.");
  private readonly viewer = el("div", { class: "eval-viewer", hidden: true });
  private readonly rows = new Map<number, Evaluation>();
  private selected: number | null = null;
  private shown: { id: number; status: string; video: boolean; done: number } | null = null;
  private blobUrl: string | null = null;
  private closed = false;

  constructor(
    private readonly experimentId: number,
    private readonly onError: (e: unknown) => void,
    /** Every change of the rows (the filmstrip shows the scheduled ones). */
    private readonly onRows: (rows: Evaluation[]) => void = () => {},
  ) {
    this.root = el(
      "section",
      { class: "panel evaluations" },
      el("h2", {}, "Evaluations"),
      this.form,
      el("div", { class: "table-wrap" }, el("table", { class: "eval-list" }, el("thead", {}, el("tr", {}, ["#", "Checkpoint", "Episodes", "Return (mean ± std)", "Status", ""].map((h) => el("th", {}, h)))), this.list)),
      this.empty,
      this.viewer,
    );
  }

  /** Open the form for a checkpoint row's "Evaluate". */
  openForm(c: Checkpoint): void {
    clear(this.form);
    const errors = el("p", { class: "field-error" });
    const episodes = el("input", { type: "number", name: "episodes", min: 1, max: 1000, value: 10, required: true });
    const seed = el("input", { type: "number", name: "seed", min: 0, value: 0 });
    const deterministic = el("input", { type: "checkbox", name: "deterministic", checked: true });
    const video = el("input", { type: "checkbox", name: "record_video", checked: true });
    const submit = el("button", { type: "submit", class: "btn", "data-action": "start-evaluation" }, "Start");
    const cancel = el("button", { type: "button", class: "btn secondary", onclick: () => (this.form.hidden = true) }, "Cancel");
    this.form.append(
      el("h3", {}, `Evaluate iteration ${c.iteration} (${fmtSteps(c.env_steps)} steps)`),
      el(
        "div",
        { class: "eval-fields" },
        el("label", {}, "Episodes ", episodes),
        el("label", {}, "Seed ", seed),
        el("label", { class: "check" }, deterministic, " deterministic"),
        el("label", { class: "check" }, video, " record video"),
        submit,
        cancel,
      ),
      errors,
    );
    this.form.onsubmit = (ev) => {
      ev.preventDefault();
      submit.disabled = true;
      setText(errors, "");
      api
        .evaluate(this.experimentId, {
          checkpoint: c.id,
          episodes: Number(episodes.value),
          seed: Number(seed.value),
          deterministic: deterministic.checked,
          record_video: video.checked,
        })
        .then((created) => {
          this.form.hidden = true;
          this.upsert(created);
          this.select(created.id);
        })
        .catch((e: unknown) => {
          const fields = e instanceof ApiError ? e.fields.map((f) => `${f.field}: ${f.message}`) : [];
          setText(errors, fields.length ? fields.join("; ") : e instanceof Error ? e.message : String(e));
        })
        .finally(() => (submit.disabled = false));
    };
    this.form.hidden = false;
    this.form.scrollIntoView({ block: "nearest" });
    episodes.focus();
  }

  /** Load (or reload after a reconnect) the experiment's evaluations. */
  async refresh(): Promise<void> {
    const list = await api.evaluations(this.experimentId);
    if (this.closed) return;
    this.rows.clear();
    for (const e of list) this.rows.set(e.id, e);
    this.renderList();
    if (this.selected === null && list.length) this.select(list[0].id);
    else if (this.selected !== null) void this.showSelected();
  }

  /** An `evaluation` message of the experiment's stream. */
  onMessage(id: number, evaluation: Evaluation | null): void {
    if (evaluation === null) {
      this.rows.delete(id);
      if (this.selected === id) this.select(null);
      this.renderList();
      return;
    }
    this.upsert(evaluation);
    if (this.selected === id) void this.showSelected();
  }

  close(): void {
    this.closed = true;
    if (this.blobUrl) URL.revokeObjectURL(this.blobUrl);
  }

  private upsert(e: Evaluation): void {
    this.rows.set(e.id, e);
    this.renderList();
  }

  private select(id: number | null): void {
    this.selected = id;
    this.shown = null;
    this.renderList();
    void this.showSelected();
  }

  private renderList(): void {
    clear(this.list);
    const items = [...this.rows.values()].sort((a, b) => b.id - a.id);
    this.empty.hidden = items.length > 0;
    this.onRows(items);
    for (const e of items) {
      const stats = e.return_mean === null ? "–" : `${fmtNumber(e.return_mean)} ± ${fmtNumber(e.return_std)}`;
      this.list.append(
        el(
          "tr",
          { "data-evaluation": e.id, class: e.id === this.selected ? "selected" : "", onclick: () => this.select(e.id) },
          el("td", { class: "num" }, String(e.id)),
          el(
            "td",
            {},
            `iteration ${e.checkpoint_iteration}`,
            e.checkpoint === "best" || e.checkpoint === "latest" ? ` (${e.checkpoint})` : "",
            e.scheduled ? el("span", { class: "chip", "data-scheduled": "", title: "Recorded by evaluation_every as the run trained" }, "scheduled") : "",
          ),
          el("td", { class: "num" }, `${e.episodes_done}/${e.episodes}`),
          el("td", { class: "num" }, stats),
          el("td", {}, statusBadge(e.status)),
          el(
            "td",
            {},
            el(
              "button",
              {
                type: "button",
                class: "btn small secondary",
                "data-action": "delete-evaluation",
                title: "Delete this evaluation and its video",
                onclick: (ev: Event) => {
                  ev.stopPropagation();
                  api.deleteEvaluation(e.id).catch(this.onError);
                },
              },
              "Delete",
            ),
          ),
        ),
      );
    }
  }

  /** Re-render the viewer only when what it shows changed (status, episodes, video). */
  private async showSelected(): Promise<void> {
    const id = this.selected;
    const row = id === null ? undefined : this.rows.get(id);
    this.viewer.hidden = !row;
    if (id === null || !row) return;
    const key = { id, status: row.status, video: row.video !== null, done: row.episodes_done };
    if (this.shown && JSON.stringify(this.shown) === JSON.stringify(key)) return;
    this.shown = key;
    try {
      const detail = await api.evaluation(id);
      if (this.closed || this.selected !== id) return;
      await this.renderViewer(detail);
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) this.onError(e);
    }
  }

  private async renderViewer(d: EvaluationDetail): Promise<void> {
    const head = el("h3", {}, `Evaluation ${d.id}: iteration ${d.checkpoint_iteration}, ${d.episodes} episodes, seed ${d.seed}, ${d.deterministic ? "deterministic" : "stochastic"}`);
    const media = el("div", { class: "eval-video" });
    const dist = el("div", { class: "eval-dist" });
    const parts: (HTMLElement | null)[] = [head];
    if (d.status === "failed") parts.push(el("pre", { class: "error-text", "data-evaluation-error": "" }, d.error ?? "failed"));
    else if (!FINISHED.has(d.status)) parts.push(el("p", { class: "muted", "data-evaluation-progress": "" }, `${d.status}: ${d.episodes_done} of ${d.episodes} episodes done`));
    if (d.video) {
      const v = d.video;
      const video = el("video", { controls: true, muted: true, playsinline: true, preload: "auto", width: v.width, "data-evaluation-video": d.id });
      video.src = await this.videoSrc(v.url);
      const notes = [`${v.codec} · ${fmtBytes(v.size_bytes)} · ${v.frames} frames at ${fmtNumber(v.fps)} fps`];
      if (v.subsampled) notes.push(`every ${v.frame_step}th frame of ${v.source_frames} kept`);
      if (v.cut) notes.push("episode cut to fit the size cap");
      media.append(video, el("p", { class: "muted hint" }, notes.join(" · ")));
    } else if (d.video_message) {
      media.append(el("p", { class: "muted", "data-video-message": "" }, `No video: ${d.video_message}`));
    } else if (d.record_video && !FINISHED.has(d.status)) {
      media.append(el("p", { class: "muted" }, "The video appears when the first episode is recorded and uploaded."));
    }
    if (d.returns.length) {
      dist.append(
        returnStrip(d.returns),
        el("p", { class: "eval-summary" }, `mean ${fmtNumber(d.return_mean)} ± ${fmtNumber(d.return_std)} · min ${fmtNumber(d.return_min)} · max ${fmtNumber(d.return_max)} · mean length ${fmtNumber(d.lengths.reduce((a, b) => a + b, 0) / d.lengths.length)}`),
      );
    }
    clear(this.viewer);
    this.viewer.append(...parts.filter((p): p is HTMLElement => p !== null), el("div", { class: "eval-body" }, media, dist));
  }

  /** Plain URL (Range requests for seeking); with an API token, a blob fetched with it. */
  private async videoSrc(url: string): Promise<string> {
    const token = apiToken();
    if (!token) return url;
    const resp = await fetch(url, { headers: { Authorization: `Bearer ${token}` } });
    if (!resp.ok) throw new ApiError(resp.status, `http_${resp.status}`, `video download failed (${resp.status})`);
    if (this.blobUrl) URL.revokeObjectURL(this.blobUrl);
    this.blobUrl = URL.createObjectURL(await resp.blob());
    return this.blobUrl;
  }
}

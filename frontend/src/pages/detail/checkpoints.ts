/** Checkpoints table with download buttons; best and latest are marked and linked on top. */

import { apiToken, checkpointDownloadUrl, downloadWithToken } from "../../api/client";
import type { Checkpoint } from "../../api/types";
import { fmtBytes, fmtClock, fmtNumber, fmtSteps, fmtTime } from "../../data/format";
import { clear, el } from "../../ui/dom";

export class CheckpointsPanel {
  readonly root: HTMLElement;
  private readonly body = el("tbody");
  private readonly empty = el("p", { class: "muted" }, "No checkpoint yet.");
  private readonly links = el("div", { class: "actions" });
  count = 0;

  constructor(
    private readonly experimentId: number,
    private readonly onError: (e: unknown) => void,
    private readonly onEvaluate?: (c: Checkpoint) => void,
  ) {
    this.root = el(
      "section",
      { class: "panel" },
      el("h2", {}, "Checkpoints"),
      this.links,
      el(
        "div",
        { class: "table-wrap" },
        el(
          "table",
          { class: "checkpoints" },
          el("thead", {}, el("tr", {}, ["Iteration", "Env steps", "Return", "Saved", ""].map((h) => el("th", {}, h)))),
          this.body,
        ),
      ),
      this.empty,
    );
  }

  /** Plain links stream to disk; with an API token the archive is fetched with its header. */
  private link(cid: number | "best" | "latest", label: string, cls: string): HTMLAnchorElement {
    const href = checkpointDownloadUrl(this.experimentId, cid);
    const a = el("a", { class: cls, href, download: "", "data-download": String(cid) }, label);
    a.addEventListener("click", (ev) => {
      if (!apiToken()) return;
      ev.preventDefault();
      downloadWithToken(href, `experiment-${this.experimentId}-checkpoint-${cid}.tar.gz`).catch(this.onError);
    });
    return a;
  }

  render(list: Checkpoint[]): void {
    this.count = list.length;
    clear(this.body);
    clear(this.links);
    this.empty.hidden = list.length > 0;
    if (list.length) this.links.append(this.link("best", "⬇ Best", "btn secondary"), this.link("latest", "⬇ Latest", "btn secondary"));
    for (const c of [...list].sort((a, b) => b.iteration - a.iteration)) {
      const marks = [c.is_best ? el("span", { class: "mark best" }, "best") : null, c.is_latest ? el("span", { class: "mark latest" }, "latest") : null];
      // Five columns, the buttons in one cell: the table fits its half of a 1400 px window
      // (with eight, "Evaluate" was cut off); the size is on the download button.
      const download = this.link(c.id, "Download", "btn small");
      download.title = `${fmtBytes(c.size_bytes)} archive`;
      const evaluate = this.onEvaluate
        ? el("button", { type: "button", class: "btn small secondary", "data-action": "evaluate", title: "Run this checkpoint for some episodes and record a video", onclick: () => this.onEvaluate?.(c) }, "Evaluate")
        : null;
      this.body.appendChild(
        el(
          "tr",
          { "data-checkpoint": c.id },
          el("td", {}, el("span", { class: "iteration" }, String(c.iteration)), " ", marks),
          el("td", { class: "num" }, fmtSteps(c.env_steps)),
          el("td", { class: "num" }, fmtNumber(c.episode_return_mean)),
          el("td", { title: fmtTime(c.created_at) }, fmtClock(c.created_at)),
          el("td", { class: "row-actions" }, download, evaluate),
        ),
      );
    }
  }
}

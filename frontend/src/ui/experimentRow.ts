/** One row of the experiments table: built once, then patched cell by cell on every update. */

import type { Experiment } from "../api/types";
import { configValue, metricColumn, metricValue, type SortKey, type Summaries } from "../data/sortRuns";
import { elapsedSeconds, fmtDuration, fmtNumber, fmtSteps, fmtTime } from "../data/format";
import { el, setText } from "./dom";
import { progressBar, updateProgress } from "./progress";
import { statusBadge, updateBadge } from "./status";

/** Header and sort key of each column (null: not sortable). */
export const COLUMNS: [string, SortKey | null][] = [
  ["", null],
  ["Name", "name"],
  ["Env", "env"],
  ["Status", "status"],
  ["Progress", "progress"],
  ["Return", "return"],
  ["Best", "best"],
  ["Env steps", "steps"],
  ["Started", "started"],
  ["Duration", "duration"],
  ["Tags", null],
];

export class ExperimentRow {
  readonly tr: HTMLTableRowElement;
  readonly check: HTMLInputElement;
  private readonly badge: HTMLElement;
  private readonly bar: HTMLElement;
  private readonly cells: Record<"name" | "notes" | "ret" | "best" | "steps" | "started" | "duration" | "tags", HTMLElement>;

  /** The extra columns' cells: config fields and metric summaries (see sortRuns.ts). */
  private readonly extraCells: [string, HTMLElement][];

  constructor(
    public exp: Experiment,
    selected: boolean,
    onSelect: (id: number, on: boolean) => void,
    columns: readonly string[] = [],
    private readonly summaries: Summaries = new Map(),
  ) {
    this.extraCells = columns.map((col) => [
      col,
      metricColumn(col) ? el("td", { class: "num metric-cell", "data-metric-col": col }) : el("td", { class: "config-cell", "data-config": col }),
    ]);
    this.check = el("input", { type: "checkbox", "aria-label": `Select ${exp.name}` });
    this.check.checked = selected;
    this.check.addEventListener("change", () => onSelect(exp.id, this.check.checked));
    this.cells = {
      name: el("a", { href: `#/experiments/${exp.id}` }),
      notes: el("div", { class: "row-notes muted" }),
      ret: el("td", { class: "num" }),
      best: el("td", { class: "num" }),
      steps: el("td", { class: "num" }),
      started: el("td"),
      duration: el("td", { class: "num" }),
      tags: el("td", { class: "tags" }),
    };
    this.badge = statusBadge(exp.status);
    this.bar = progressBar();
    const c = this.cells;
    this.tr = el(
      "tr",
      { "data-id": exp.id },
      el("td", {}, this.check),
      el("td", { class: "name" }, c.name, exp.sweep_id ? [" ", el("a", { class: "sweep-link muted", href: `#/sweeps/${exp.sweep_id}`, title: "Member of a sweep" }, `sweep ${exp.sweep_id}`)] : null, c.notes),
      el("td", {}, String(exp.config?.env_id ?? "–")),
      el("td", {}, this.badge),
      el("td", { class: "progress-cell" }, this.bar),
      [c.ret, c.best, c.steps, c.started, c.duration, c.tags],
      this.extraCells.map(([, td]) => td),
    );
    this.render(Date.now());
  }

  /** Patch the cells from `exp` (only text that changed touches the DOM). */
  render(now: number): void {
    const e = this.exp;
    updateBadge(this.badge, e.status);
    updateProgress(this.bar, e, now);
    setText(this.cells.name, e.name);
    setText(this.cells.notes, notesLine(e.notes));
    this.cells.notes.title = e.notes ?? "";
    setText(this.cells.ret, fmtNumber(e.episode_return_mean));
    setText(this.cells.best, fmtNumber(e.best_return));
    setText(this.cells.steps, fmtSteps(e.env_steps));
    setText(this.cells.started, fmtTime(e.started_at));
    setText(this.cells.duration, fmtDuration(elapsedSeconds(e.started_at, e.finished_at, now)));
    setText(this.cells.tags, e.tags.join(", "));
    for (const [col, td] of this.extraCells) {
      setText(td, metricColumn(col) ? fmtNumber(metricValue(this.summaries, e.id, col)) : showValue(configValue(e.config, col)));
    }
    this.tr.dataset.status = e.status;
  }
}

/** A note's first line of text, for a table cell (its markdown marks left out). */
export function notesLine(notes: string | null | undefined): string {
  const line = (notes ?? "").split("\n").map((l) => l.replace(/^\s*(#+|[-*]|\d+\.)\s+/, "").trim()).find(Boolean) ?? "";
  const plain = line.replace(/[*`]/g, "").replace(/\[([^\]]+)\]\([^)]*\)/g, "$1");
  return plain.length > 80 ? `${plain.slice(0, 79)}…` : plain;
}

function showValue(v: unknown): string {
  if (v === undefined) return "–";
  if (v === null) return "none";
  return typeof v === "object" ? JSON.stringify(v) : String(v);
}

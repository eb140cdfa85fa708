/**
 * Reference curves over a chart: for each reference of the page's env ids, one toggle
 * (labelled with its source and settings) and three lines added to the chart once (mean dashed,
 * min/max as a shaded band), hidden until toggled. Shared by the experiment and compare pages.
 */

import { api } from "../api/client";
import type { Reference } from "../api/types";
import type { XY } from "../data/align";
import { referenceTables } from "../data/overlay";
import type { XMode } from "../data/plotData";
import type { MetricChart } from "./chart";
import { el } from "./dom";

const COLORS = ["#6b7280", "#a16207", "#0f766e"];
const EMPTY: XY = { x: [], y: [] };

interface Entry {
  ref: Reference;
  first: number; // uPlot series index of its mean line (max and min follow)
  shown: boolean;
  box: HTMLInputElement;
}

export function describeSettings(ref: Reference): string {
  return Object.entries(ref.settings)
    .map(([k, v]) => `${k} ${typeof v === "object" ? JSON.stringify(v) : String(v)}`)
    .join(", ");
}

export class ReferenceOverlay {
  readonly root: HTMLElement;
  private readonly entries: Entry[] = [];
  private readonly requested = new Set<string>();
  private chart: MetricChart | null = null;

  constructor(private readonly onChange: () => void) {
    this.root = el("div", { class: "ref-overlay", hidden: true });
  }

  /** The metric the references are curves of (the chart to draw them on). */
  static readonly METRIC = "episode_return_mean";

  /** Fetch the references of these env ids (each once) and add them to `chart`. */
  async load(chart: MetricChart, envIds: readonly string[]): Promise<void> {
    if (this.chart !== chart) chart.onShown((index, show) => this.onShown(index, show));
    this.chart = chart;
    const wanted = [...new Set(envIds)].filter((id) => id && !this.requested.has(id));
    for (const id of wanted) this.requested.add(id);
    const lists = await Promise.all(wanted.map((id) => api.references(id)));
    const several = this.requested.size > 1;
    for (const ref of lists.flatMap((l) => l.items)) if (ref.metric === ReferenceOverlay.METRIC) this.add(ref, several);
  }

  private add(ref: Reference, prefixEnv: boolean): void {
    if (!this.chart) return;
    const color = COLORS[this.entries.length % COLORS.length];
    const name = prefixEnv ? `${ref.env_id} ${ref.label}` : ref.label;
    const first = this.chart.addLines(
      [
        { label: `${name} mean`, color, dash: [6, 4], show: false },
        { label: `${name} max`, color, bandEdge: true, show: false },
        { label: `${name} min`, color, bandEdge: true, show: false },
      ],
      [1, 2],
    );
    const box = el("input", { type: "checkbox", name: "reference", "data-env": ref.env_id });
    const entry: Entry = { ref, first, shown: false, box };
    this.entries.push(entry);
    this.root.appendChild(this.toggle(entry, name));
    this.root.hidden = false;
  }

  /** Show or hide a reference's three lines together, from its toggle or the legend. */
  private setEntry(entry: Entry, shown: boolean): void {
    if (entry.shown === shown) return;
    entry.shown = shown;
    entry.box.checked = shown;
    for (let i = 0; i < 3; i++) this.chart?.setShown(entry.first + i, shown);
    this.onChange();
  }

  private onShown(index: number, show: boolean): void {
    const entry = this.entries.find((e) => index >= e.first && index < e.first + 3);
    if (entry) this.setEntry(entry, show);
  }

  private toggle(entry: Entry, name: string): HTMLElement {
    const { ref, box } = entry;
    box.addEventListener("change", () => this.setEntry(entry, box.checked));
    const seeds = ref.seeds.length;
    const settings = describeSettings(ref);
    const details = `${ref.source}. Settings: ${settings}. ${ref.budget_env_steps.toLocaleString()} env steps per run; ${ref.machine}. Regenerate: ${ref.command}.${ref.notes ? ` ${ref.notes}.` : ""}`;
    return el(
      "label",
      { class: "ref-toggle", title: details, "data-env": ref.env_id },
      box,
      ` Reference: ${name}, mean and min–max of ${seeds} seeds `,
      el("small", { class: "muted ref-source" }, `${ref.source} · ${settings}`),
    );
  }

  /** Three tables (mean, max, min) per reference, in the order of its lines; a hidden one
   * gives empty tables, so it neither stretches the x axis nor costs anything to align. */
  tables(xMode: XMode): XY[] {
    return this.entries.flatMap((e) => (e.shown ? referenceTables(e.ref, xMode) : [EMPTY, EMPTY, EMPTY]));
  }

  /** uPlot series indices of the band edges (for gap filling after the merge). */
  edges(): number[] {
    return this.entries.flatMap((e) => [e.first + 1, e.first + 2]);
  }

  get count(): number {
    return this.entries.length;
  }
}

/**
 * The sweep chart: one shaded band (95 % bootstrap interval or min/max over seeds) and one mean
 * line per seed group on the common env-steps grid. Built once for the sweep's groups, then fed
 * with `setData` (live updates and band-mode switches never rebuild it).
 */

import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import type { Aligned } from "../data/align";
import type { Scatter } from "../data/sweepData";
import { fmtSteps } from "../data/format";
import { el } from "./dom";
import { PALETTE } from "./chart";

function withAlpha(hex: string, alpha: number): string {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
}

export function groupColor(index: number): string {
  return PALETTE[index % PALETTE.length];
}

export class SweepChart {
  readonly root: HTMLElement;
  private readonly body: HTMLElement;
  private readonly plot: uPlot;
  private readonly observer: ResizeObserver;

  constructor(parent: HTMLElement, title: string, groups: { index: number; label: string }[]) {
    this.body = el("div", { class: "chart-body" });
    this.root = el("section", { class: "chart", "data-chart": title, "data-groups": groups.length, "data-points": 0 }, el("h3", {}, title), this.body);
    parent.appendChild(this.root);
    const series: uPlot.Series[] = [{ label: "env steps", value: (_u, v) => (v === null || v === undefined ? "–" : fmtSteps(v)) }];
    const bands: uPlot.Band[] = [];
    groups.forEach((g, i) => {
      const color = groupColor(g.index);
      const name = g.label || "all seeds";
      const base = 1 + 3 * i;
      series.push(
        { label: `${name} upper`, stroke: withAlpha(color, 0.35), width: 1, spanGaps: false, points: { show: false } },
        { label: `${name} lower`, stroke: withAlpha(color, 0.35), width: 1, spanGaps: false, points: { show: false } },
        { label: name, stroke: color, width: 2, spanGaps: false, points: { show: false } },
      );
      bands.push({ series: [base, base + 1], fill: withAlpha(color, 0.15) });
    });
    this.root.dataset.bands = String(bands.length);
    this.plot = new uPlot(
      {
        width: this.width(),
        height: 300,
        series,
        bands,
        scales: { x: { time: false } },
        axes: [{ values: (_u, splits) => splits.map((v) => fmtSteps(v)) }, { size: 60 }],
        legend: { live: true },
        hooks: {
          draw: [
            (u) => {
              const idxs = u.series[1]?.idxs;
              this.root.dataset.drawn = String(idxs ? idxs[1] - idxs[0] + 1 : 0);
            },
          ],
        },
      },
      [[], ...series.slice(1).map(() => [])] as uPlot.AlignedData,
      this.body,
    );
    this.observer = new ResizeObserver(() => {
      const w = this.width();
      if (Math.abs(w - this.plot.width) > 2) this.plot.setSize({ width: w, height: this.plot.height });
    });
    this.observer.observe(this.body);
  }

  private width(): number {
    return Math.max(240, Math.floor(this.body.clientWidth || this.root.clientWidth || 600));
  }

  setData(data: Aligned): void {
    this.plot.setData(data as uPlot.AlignedData);
    this.root.dataset.points = String(data[0].length);
  }

  destroy(): void {
    this.observer.disconnect();
    this.plot.destroy();
    this.root.remove();
  }
}

/** Hyperparameter -> final value: each member a small point, each group's mean a large one,
 * both in the group's colour (the band chart's); ticks at the grid's values, on a log axis
 * when they span a decade. */
export class ScatterChart {
  readonly root: HTMLElement;
  private readonly body: HTMLElement;
  private plot: uPlot | null = null;
  private shape = "";
  private readonly observer: ResizeObserver;

  constructor(parent: HTMLElement, readonly key: string) {
    this.body = el("div", { class: "chart-body" });
    this.root = el("section", { class: "chart scatter", "data-chart": `final vs ${key}`, "data-points": 0 }, el("h3", {}, `Final return vs ${key}`), this.body);
    parent.appendChild(this.root);
    // Follow the grid cell: a chart built while the page was still laying out kept that width.
    this.observer = new ResizeObserver(() => {
      const w = this.width();
      if (this.plot && Math.abs(w - this.plot.width) > 2) this.plot.setSize({ width: w, height: this.plot.height });
    });
    this.observer.observe(this.root);
  }

  private width(): number {
    const style = getComputedStyle(this.root);
    const inner = this.root.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    return Math.max(240, Math.floor(inner || 360));
  }

  private build(s: Scatter, groups: number[]): void {
    const cats = s.categories;
    const fmtX = (v: number | null) => (v === null || !Number.isFinite(v) ? "" : cats ? (cats[Math.round(v)] ?? "") : fmtValue(v));
    const noLine = () => null;
    const series: uPlot.Series[] = [{ label: this.key, value: (_u, v) => (v === null || v === undefined ? "–" : fmtX(v)) }];
    for (const g of groups) {
      const color = groupColor(g);
      series.push(
        { label: "member", stroke: withAlpha(color, 0.55), paths: noLine, points: { show: true, size: 5, fill: withAlpha(color, 0.55) } },
        { label: "group mean", stroke: color, paths: noLine, points: { show: true, size: 10, fill: color } },
      );
    }
    this.plot?.destroy();
    this.plot = new uPlot(
      {
        width: this.width(),
        height: 220,
        series,
        scales: {
          // Padded so the points at either end are drawn whole.
          x: s.log
            ? { time: false, distr: 3, range: (_u, lo, hi) => [lo / 1.6, hi * 1.6] }
            : { time: false, range: (_u, lo, hi) => (lo === hi ? [lo - 1, hi + 1] : [lo - (hi - lo) * 0.08, hi + (hi - lo) * 0.08]) },
        },
        // Every grid value labelled: a log axis otherwise labels powers of ten only (3e-4 left bare).
        axes: [{ splits: () => s.ticks, filter: (_u, splits) => splits, values: (_u, splits) => splits.map((v) => fmtX(v)) }, { size: 60 }],
        cursor: { drag: { x: false, y: false } },
        legend: { show: false },
      },
      [[], ...series.slice(1).map(() => [])] as uPlot.AlignedData,
      this.body,
    );
    this.root.dataset.log = String(s.log);
    this.root.dataset.ticks = s.ticks.map((v) => fmtX(v)).join(" ");
    this.root.dataset.colors = groups.map((g) => groupColor(g)).join(" ");
  }

  setData(s: Scatter): void {
    const groups = [...new Set(s.group)].sort((a, b) => a - b);
    const shape = JSON.stringify([s.log, s.categories, s.ticks, groups]);
    if (!this.plot || shape !== this.shape) this.build(s, groups);
    this.shape = shape;
    const columns: (number | null)[][] = [];
    for (const g of groups) {
      columns.push(s.member.map((v, i) => (s.group[i] === g ? v : null)));
      columns.push(s.mean.map((v, i) => (s.group[i] === g ? v : null)));
    }
    this.plot?.setData([s.x, ...columns] as uPlot.AlignedData);
    this.root.dataset.points = String(s.mean.filter((v) => v !== null).length);
  }

  destroy(): void {
    this.observer.disconnect();
    this.plot?.destroy();
    this.root.remove();
  }
}

/** A grid value as written: 0.0003 -> "3e-4", 0.001 -> "1e-3", 64 -> "64", 0.25 -> "0.25". */
export function fmtValue(v: number): string {
  if (v !== 0 && Math.abs(v) < 0.01) {
    const [mant, exp] = v.toExponential().split("e");
    return `${Number(Number(mant).toPrecision(3))}e${Number(exp)}`;
  }
  return String(Number(v.toPrecision(4)));
}

/**
 * The sweep chart: one shaded band (95 % bootstrap interval or min/max over seeds) and one mean
 * line per seed group on the common env-steps grid. Built once for the sweep's groups, then fed
 * with `setData` (live updates and band-mode switches never rebuild it).
 */

import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import type { Aligned } from "../data/align";
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

/** Hyperparameter -> final value: each member a small point, each group's mean a large one. */
export class ScatterChart {
  readonly root: HTMLElement;
  private readonly body: HTMLElement;
  private plot: uPlot | null = null;
  private categories: string[] | null = null;
  private log = false;

  constructor(parent: HTMLElement, readonly key: string) {
    this.body = el("div", { class: "chart-body" });
    this.root = el("section", { class: "chart scatter", "data-chart": `final vs ${key}`, "data-points": 0 }, el("h3", {}, `Final return vs ${key}`), this.body);
    parent.appendChild(this.root);
  }

  private build(): void {
    const cats = this.categories;
    const fmtX = (v: number | null) => (v === null || !Number.isFinite(v) ? "" : cats ? (cats[Math.round(v)] ?? "") : String(Number(v.toPrecision(3))));
    const noLine = () => null;
    this.plot?.destroy();
    this.plot = new uPlot(
      {
        width: Math.max(240, Math.floor(this.body.clientWidth || 360)),
        height: 220,
        series: [
          { label: this.key, value: (_u, v) => (v === null || v === undefined ? "–" : fmtX(v)) },
          { label: "member", stroke: "#6b7280", paths: noLine, points: { show: true, size: 5, fill: "#6b7280" } },
          { label: "group mean", stroke: PALETTE[0], paths: noLine, points: { show: true, size: 10, fill: PALETTE[0] } },
        ],
        scales: {
          // Padded so the points at either end are drawn whole.
          x: this.log
            ? { time: false, distr: 3, range: (_u, lo, hi) => [lo / 1.6, hi * 1.6] }
            : { time: false, range: (_u, lo, hi) => (lo === hi ? [lo - 1, hi + 1] : [lo - (hi - lo) * 0.08, hi + (hi - lo) * 0.08]) },
        },
        axes: [{ values: (_u, splits) => splits.map((v) => (cats && !Number.isInteger(v) ? "" : fmtX(v))) }, { size: 60 }],
        cursor: { drag: { x: false, y: false } },
        legend: { live: true },
      },
      [[], [], []],
      this.body,
    );
  }

  setData(x: number[], member: (number | null)[], mean: (number | null)[], categories: string[] | null, log: boolean): void {
    const rebuild = !this.plot || log !== this.log || JSON.stringify(categories) !== JSON.stringify(this.categories);
    this.categories = categories;
    this.log = log;
    if (rebuild) this.build();
    this.plot?.setData([x, member, mean] as uPlot.AlignedData);
    this.root.dataset.points = String(mean.filter((v) => v !== null).length);
  }

  destroy(): void {
    this.plot?.destroy();
    this.root.remove();
  }
}

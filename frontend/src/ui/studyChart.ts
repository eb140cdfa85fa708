/**
 * A study's "best value over trials": x the trial number, a step line of the best objective so
 * far and a point per complete trial's value. Built once, then fed with `setData` on every poll.
 */

import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { fmtNumber } from "../data/format";
import { el } from "./dom";
import { PALETTE } from "./chart";

export const BEST_CHART_TITLE = "Best value over trials";

export class BestValueChart {
  readonly root: HTMLElement;
  private readonly body: HTMLElement;
  private readonly plot: uPlot;
  private readonly observer: ResizeObserver;

  constructor(parent: HTMLElement, metric: string) {
    this.body = el("div", { class: "chart-body" });
    this.root = el("section", { class: "chart", "data-chart": BEST_CHART_TITLE, "data-points": 0 }, el("h3", {}, `${BEST_CHART_TITLE} (${metric})`), this.body);
    parent.appendChild(this.root);
    const value = (_u: uPlot, v: number | null) => (v === null || v === undefined ? "–" : fmtNumber(v));
    this.plot = new uPlot(
      {
        width: this.width(),
        height: 260,
        series: [
          { label: "trial", value: (_u, v) => (v === null || v === undefined ? "–" : `#${v}`) },
          { label: "best so far", stroke: PALETTE[1], width: 2, value, paths: uPlot.paths.stepped?.({ align: 1 }), points: { show: false } },
          { label: "trial value", stroke: PALETTE[0], value, paths: () => null, points: { show: true, size: 7, fill: PALETTE[0] } },
        ],
        scales: { x: { time: false, range: (_u, lo, hi) => (lo === hi ? [lo - 1, hi + 1] : [lo - 0.5, hi + 0.5]) } },
        axes: [{ label: "trial", values: (_u, splits) => splits.map((v) => (Number.isInteger(v) ? String(v) : "")) }, { size: 60 }],
        legend: { live: true },
      },
      [[], [], []],
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

  /** Complete trials by number: each one's value and the best so far. */
  setData(x: number[], value: number[], best: number[]): void {
    this.plot.setData([x, best, value]);
    this.root.dataset.points = String(x.length);
    this.root.dataset.best = best.length ? String(best[best.length - 1]) : "";
  }

  destroy(): void {
    this.observer.disconnect();
    this.plot.destroy();
    this.root.remove();
  }
}

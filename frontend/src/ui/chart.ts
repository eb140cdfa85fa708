/**
 * One uPlot chart, created once and then fed with `setData` (never rebuilt per message). Drag
 * to zoom reports the selected x range so the page can fetch it at full resolution;
 * double-click resets. Changing the log scale or the theme rebuilds it (a user action, rare).
 */

import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import type { Aligned } from "../data/align";
import { el } from "./dom";

export interface LineDef {
  label: string;
  color: string;
  /** Drawn as a faint band edge rather than a line (return min / max). */
  bandEdge?: boolean;
  dash?: number[];
  /** Hidden lines keep their legend entry (greyed) and leave the y range alone. */
  show?: boolean;
}

export interface ChartOptions {
  title: string;
  lines: LineDef[];
  /** uPlot series indices (lines are 1-based) of a band's upper and lower edge. */
  band?: [number, number];
  /** More bands, same indexing (overlays add theirs with `addLines`). */
  bands?: [number, number][];
  xLabel: string;
  log: boolean;
  height?: number;
  formatX?: (v: number) => string;
  /** Charts sharing a key show the cursor at the same x together. */
  syncKey?: string;
  onZoom?: (lo: number, hi: number) => void;
  onResetZoom?: () => void;
}

export const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#d97706", "#9333ea", "#0891b2", "#db2777", "#65a30d", "#4b5563", "#ea580c"];

function cssVar(name: string, fallback: string): string {
  const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  return v || fallback;
}

function withAlpha(hex: string, alpha: number): string {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
}

function seriesOf(l: LineDef): uPlot.Series {
  return {
    label: l.label,
    stroke: l.bandEdge ? withAlpha(l.color, 0.35) : l.color,
    width: l.bandEdge ? 1 : 1.5,
    dash: l.dash,
    show: l.show ?? true,
    spanGaps: true,
    points: { show: false },
  };
}

export class MetricChart {
  readonly root: HTMLElement;
  private readonly body: HTMLElement;
  private plot: uPlot | null = null;
  private data: Aligned = [[]];
  private opts: ChartOptions;
  /** An x value drawn as a vertical line (the filmstrip's selected step), or null. */
  private marker: number | null = null;
  private readonly shownListeners: ((index: number, show: boolean) => void)[] = [];
  /** True while the user looks at a zoomed range: live updates then keep the x scale. */
  zoomed = false;
  private readonly resizeObserver: ResizeObserver;
  private readonly scheme = matchMedia("(prefers-color-scheme: dark)");
  /** Axis and grid colours are read from CSS at build time: rebuild when the theme flips. */
  private readonly onScheme = () => this.reconfigure({});

  constructor(parent: HTMLElement, opts: ChartOptions) {
    this.opts = opts;
    this.body = el("div", { class: "chart-body" });
    this.root = el("section", { class: "chart", "data-chart": opts.title, "data-points": 0 }, el("h3", {}, opts.title), this.body);
    parent.appendChild(this.root);
    this.data = [[], ...opts.lines.map(() => [])];
    this.build();
    this.resizeObserver = new ResizeObserver(() => this.resize());
    this.resizeObserver.observe(this.body);
    this.scheme.addEventListener("change", this.onScheme);
  }

  private width(): number {
    return Math.max(200, Math.floor(this.body.clientWidth || this.root.clientWidth || 400));
  }

  private build(): void {
    const o = this.opts;
    const axisStroke = cssVar("--fg-muted", "#666");
    const grid = cssVar("--grid", "rgba(128,128,128,0.15)");
    const series: uPlot.Series[] = [
      { label: o.xLabel, value: (_u, v) => (v === null || v === undefined ? "–" : o.formatX ? o.formatX(v) : String(v)) },
      ...o.lines.map(seriesOf),
    ];
    const bands = [...(o.band ? [o.band] : []), ...(o.bands ?? [])];
    const opts: uPlot.Options = {
      width: this.width(),
      height: o.height ?? 220,
      series,
      bands: bands.map((b) => this.bandOf(b)),
      scales: {
        x: { time: false },
        y: o.log ? { distr: 4, asinh: 1e-3 } : {},
      },
      axes: [
        {
          stroke: axisStroke,
          grid: { stroke: grid },
          ticks: { stroke: grid },
          values: o.formatX ? (_u, splits) => splits.map((v) => (o.formatX as (x: number) => string)(v)) : undefined,
        },
        { stroke: axisStroke, grid: { stroke: grid }, ticks: { stroke: grid }, size: 60 },
      ],
      cursor: { drag: { x: true, y: false, setScale: true }, sync: o.syncKey ? { key: o.syncKey } : undefined },
      legend: { live: true },
      hooks: {
        // A legend click shows or hides a line: remember it (rebuilds keep it) and tell listeners.
        setSeries: [
          (_u, index, change) => {
            const line = index === null ? undefined : this.opts.lines[index - 1];
            if (!line || change.show === undefined || index === null) return;
            line.show = change.show;
            for (const listener of this.shownListeners) listener(index, change.show);
          },
        ],
        // How many x positions are actually drawn (the rendered index window): lets tests and
        // benchmarks see what is on screen, not just what is held.
        draw: [
          (u) => {
            const idxs = u.series[1]?.idxs;
            this.root.dataset.drawn = String(idxs ? idxs[1] - idxs[0] + 1 : 0);
            this.root.dataset.xMax = String(u.scales.x.max ?? "");
            this.drawMarker(u);
          },
        ],
        setSelect: [
          (u) => {
            if (u.select.width < 3) return;
            const lo = u.posToVal(u.select.left, "x");
            const hi = u.posToVal(u.select.left + u.select.width, "x");
            this.zoomed = true;
            o.onZoom?.(lo, hi);
          },
        ],
      },
    };
    this.plot = new uPlot(opts, this.data as uPlot.AlignedData, this.body);
    this.plot.over.addEventListener("dblclick", () => {
      this.zoomed = false;
      o.onResetZoom?.();
    });
  }

  /** Draw (or, with null, remove) a vertical line at `x`. */
  setMarker(x: number | null): void {
    if (x === this.marker) return;
    this.marker = x;
    if (x === null) delete this.root.dataset.marker;
    else this.root.dataset.marker = String(x);
    this.plot?.redraw(false);
  }

  private drawMarker(u: uPlot): void {
    if (this.marker === null) return;
    const x = u.valToPos(this.marker, "x", true);
    const { left, top, width, height } = u.bbox;
    if (!Number.isFinite(x) || x < left || x > left + width) return;
    const ctx = u.ctx;
    ctx.save();
    ctx.strokeStyle = cssVar("--marker", "#d97706");
    ctx.lineWidth = 2 * devicePixelRatio;
    ctx.setLineDash([4 * devicePixelRatio, 3 * devicePixelRatio]);
    ctx.beginPath();
    ctx.moveTo(x, top);
    ctx.lineTo(x, top + height);
    ctx.stroke();
    ctx.restore();
  }

  private bandOf(b: [number, number]): uPlot.Band {
    return { series: b, fill: withAlpha(this.opts.lines[b[0] - 1].color, 0.12) };
  }

  /**
   * Append lines (an overlay) without rebuilding the chart; `band` gives two of them, as
   * offsets into `lines`, to shade between. Returns the uPlot series index of the first new
   * line. Their data comes with the next `setData` (until then they are empty).
   */
  addLines(lines: LineDef[], band?: [number, number]): number {
    const first = this.opts.lines.length + 1;
    const newBand: [number, number] | undefined = band ? [first + band[0], first + band[1]] : undefined;
    this.opts = { ...this.opts, lines: [...this.opts.lines, ...lines], bands: [...(this.opts.bands ?? []), ...(newBand ? [newBand] : [])] };
    const width = this.data[0].length;
    this.data = [...this.data, ...lines.map(() => new Array<number | null>(width).fill(null))] as Aligned;
    if (this.plot) {
      for (const l of lines) this.plot.addSeries(seriesOf(l));
      if (newBand) this.plot.addBand(this.bandOf(newBand));
      this.plot.setData(this.data as uPlot.AlignedData, !this.zoomed);
    }
    return first;
  }

  /** Show or hide a line (uPlot series index, 1-based), as a legend click would. */
  setShown(index: number, show: boolean): void {
    const line = this.opts.lines[index - 1];
    if (!line || line.show === show) return;
    line.show = show;
    this.plot?.setSeries(index, { show });
  }

  /** Called whenever a line is shown or hidden (by `setShown` or a click on the legend). */
  onShown(listener: (index: number, show: boolean) => void): void {
    this.shownListeners.push(listener);
  }

  /** New data for the same lines. Keeps the zoomed x range while zoomed. */
  setData(data: Aligned): void {
    this.data = data;
    if (!this.plot) return;
    if (this.zoomed) {
      // setData(…, false) keeps the scale but not the drawn index window: set the same x range
      // again so the new points inside it are drawn.
      const { min, max } = this.plot.scales.x;
      this.plot.setData(data as uPlot.AlignedData, false);
      if (min !== undefined && max !== undefined) this.plot.setScale("x", { min, max });
    } else {
      this.plot.setData(data as uPlot.AlignedData);
    }
    this.root.dataset.points = String(data[0].length);
  }

  /** Back to the full x range (after a double-click on any chart of a synced group). */
  resetZoom(): void {
    this.zoomed = false;
    this.plot?.setData(this.data as uPlot.AlignedData, true);
  }

  /** Rebuild with changed options (log scale, x axis, theme); data is kept. */
  reconfigure(patch: Partial<ChartOptions>): void {
    this.opts = { ...this.opts, ...patch };
    this.plot?.destroy();
    this.zoomed = false;
    this.build();
    this.setData(this.data);
  }

  private resize(): void {
    if (!this.plot) return;
    const w = this.width();
    if (Math.abs(w - this.plot.width) > 2) this.plot.setSize({ width: w, height: this.plot.height });
  }

  destroy(): void {
    this.resizeObserver.disconnect();
    this.scheme.removeEventListener("change", this.onScheme);
    this.plot?.destroy();
    this.plot = null;
    this.root.remove();
  }
}

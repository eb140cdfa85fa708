/**
 * Parallel coordinates for a sweep with more than one hyperparameter: an axis per grid key and
 * one for the final return, and a line per group through its values, coloured by its final
 * mean return (low: blue, high: red; groups without a return yet: grey, dashed). SVG, redrawn
 * whole on each update (a sweep has tens of groups, not thousands).
 */

import type { GroupSeries } from "../api/sweepTypes";
import { fmtValue } from "./sweepChart";

const NS = "http://www.w3.org/2000/svg";
const HEIGHT = 260;
const PAD = { top: 28, bottom: 28, side: 70 };

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>, text?: string): SVGElementTagNameMap[K] {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

function show(v: unknown): string {
  return typeof v === "number" ? fmtValue(v) : typeof v === "string" ? v : JSON.stringify(v);
}

interface Axis {
  label: string;
  /** A value's position, 0 (bottom) to 1 (top); null when it has none. */
  pos: (v: unknown) => number | null;
  ticks: [unknown, string][];
}

/** Numbers on a linear axis (log when positive over a decade or more); anything else by category. */
export function axisFor(label: string, values: unknown[]): Axis {
  const nums = values.filter((v): v is number => typeof v === "number" && Number.isFinite(v));
  if (nums.length === values.length && nums.length) {
    const log = nums.every((v) => v > 0) && Math.max(...nums) / Math.min(...nums) >= 10;
    const f = (v: number) => (log ? Math.log10(v) : v);
    const [lo, hi] = [Math.min(...nums.map(f)), Math.max(...nums.map(f))];
    const pos = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? (hi === lo ? 0.5 : (f(v) - lo) / (hi - lo)) : null);
    const distinct = [...new Set(nums)].sort((a, b) => a - b);
    return { label, pos, ticks: distinct.map((v) => [v, fmtValue(v)]) };
  }
  const cats = [...new Set(values.map(show))];
  const pos = (v: unknown) => (cats.length === 1 ? 0.5 : cats.indexOf(show(v)) / (cats.length - 1));
  return { label, pos, ticks: cats.map((c) => [c, c]) };
}

/** Blue (lowest final return) to red (highest). */
export function returnColor(t: number): string {
  const c = (a: number, b: number) => Math.round(a + (b - a) * Math.min(1, Math.max(0, t)));
  return `rgb(${c(37, 220)}, ${c(99, 38)}, ${c(235, 38)})`;
}

export class ParallelCoords {
  readonly root: HTMLElement;

  constructor(parent: HTMLElement) {
    this.root = document.createElement("div");
    this.root.className = "parallel";
    this.root.dataset.chart = "parallel coordinates";
    parent.appendChild(this.root);
  }

  render(groups: readonly GroupSeries[], keys: readonly string[]): void {
    const width = Math.max(360, this.root.clientWidth || 720);
    const finals = groups.map((g) => g.final.mean);
    const known = finals.filter((v): v is number => v !== null);
    const axes = [...keys.map((k) => axisFor(k, groups.map((g) => g.point[k]))), axisFor("final return", known.length ? known : [0])];
    const x = (i: number) => PAD.side + (i * (width - 2 * PAD.side)) / Math.max(1, axes.length - 1);
    const y = (p: number) => PAD.top + (1 - p) * (HEIGHT - PAD.top - PAD.bottom);
    const [rlo, rhi] = known.length ? [Math.min(...known), Math.max(...known)] : [0, 0];
    const root = svg("svg", { width, height: HEIGHT, viewBox: `0 0 ${width} ${HEIGHT}`, role: "img", "aria-label": "parallel coordinates of the grid and the final return" });
    groups.forEach((g, gi) => {
      const values = [...keys.map((k) => g.point[k]), finals[gi]];
      const points = axes.map((a, i) => {
        const p = values[i] === null ? null : a.pos(values[i]);
        return p === null ? null : `${x(i).toFixed(1)},${y(p).toFixed(1)}`;
      });
      const final = finals[gi];
      const color = final === null ? "#9ca3af" : returnColor(rhi === rlo ? 1 : (final - rlo) / (rhi - rlo));
      const line = svg("polyline", { points: points.filter(Boolean).join(" "), fill: "none", stroke: color, "stroke-width": 2.5, "stroke-opacity": 0.85, "data-group": g.index, "data-color": color });
      if (final === null) line.setAttribute("stroke-dasharray", "4 3");
      line.append(svg("title", {}, `${g.label || "all seeds"}: final mean ${final === null ? "–" : final.toFixed(1)}`));
      root.append(line);
    });
    axes.forEach((a, i) => {
      root.append(svg("line", { x1: x(i), x2: x(i), y1: y(0), y2: y(1), class: "axis" }));
      root.append(svg("text", { x: x(i), y: PAD.top - 12, "text-anchor": "middle", class: "axis-label" }, a.label));
      const ticks = i === axes.length - 1 ? ([[rlo, rlo.toFixed(1)], [rhi, rhi.toFixed(1)]] as [unknown, string][]) : a.ticks;
      for (const [v, text] of ticks) {
        const p = a.pos(v);
        if (p !== null) root.append(svg("text", { x: x(i) - 6, y: y(p) + 4, "text-anchor": "end", class: "tick" }, text));
      }
    });
    this.root.replaceChildren(root);
    this.root.dataset.lines = String(groups.length);
  }
}

/**
 * Parallel coordinates: an axis per hyperparameter and one for the outcome, and a line per
 * point through its values, coloured by the outcome (worst: blue, best: red; points without one
 * yet: grey, dashed). A sweep draws a line per group (its final mean return), a study a line per
 * trial (its objective value). SVG, redrawn whole on each update (tens or hundreds of lines).
 */

import type { GroupSeries } from "../api/sweepTypes";
import { fmtValue } from "./sweepChart";

const NS = "http://www.w3.org/2000/svg";
const HEIGHT = 260;
const PAD = { top: 28, bottom: 28, side: 70 };
const LABEL_CHAR_PX = 8; // about the width of a 12px bold character

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>, text?: string): SVGElementTagNameMap[K] {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

function show(v: unknown): string {
  return typeof v === "number" ? fmtValue(v) : typeof v === "string" ? v : JSON.stringify(v);
}

export interface AxisDomain {
  low: number;
  high: number;
  log: boolean;
}

interface Axis {
  label: string;
  /** A value's position, 0 (bottom) to 1 (top); null when it has none. */
  pos: (v: unknown) => number | null;
  ticks: [unknown, string][];
}

/** Numbers on a linear axis (log when positive over a decade or more); anything else by category,
 * in the order of `categories` when given (a study's choices: an ordinal axis even for numbers). */
export function axisFor(label: string, values: unknown[], categories?: readonly unknown[]): Axis {
  const nums = values.filter((v): v is number => typeof v === "number" && Number.isFinite(v));
  if (!categories && nums.length === values.length && nums.length) {
    const log = nums.every((v) => v > 0) && Math.max(...nums) / Math.min(...nums) >= 10;
    const f = (v: number) => (log ? Math.log10(v) : v);
    const [lo, hi] = [Math.min(...nums.map(f)), Math.max(...nums.map(f))];
    const pos = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? (hi === lo ? 0.5 : (f(v) - lo) / (hi - lo)) : null);
    const distinct = [...new Set(nums)].sort((a, b) => a - b);
    return { label, pos, ticks: distinct.map((v) => [v, fmtValue(v)]) };
  }
  const cats = [...new Set([...(categories ?? []), ...values].map(show))];
  const pos = (v: unknown) => (cats.length === 1 ? 0.5 : cats.indexOf(show(v)) / (cats.length - 1));
  return { label, pos, ticks: cats.map((c) => [c, c]) };
}

/** A searched range as the axis (a study's float or int parameter): the range's ends at the
 * axis's ends, five ticks between them, on a log scale when the range is searched on one. */
export function rangeAxis(label: string, domain: AxisDomain): Axis {
  const log = domain.log && domain.low > 0;
  const f = (v: number) => (log ? Math.log10(v) : v);
  const [lo, hi] = [f(domain.low), f(domain.high)];
  const pos = (v: unknown) => (typeof v === "number" && Number.isFinite(v) && (!log || v > 0) ? (hi === lo ? 0.5 : (f(v) - lo) / (hi - lo)) : null);
  const ticks = Array.from({ length: 5 }, (_, i) => {
    const t = lo + ((hi - lo) * i) / 4;
    const v = log ? 10 ** t : t;
    return [v, fmtValue(Number(v.toPrecision(3)))] as [unknown, string];
  });
  return { label, pos, ticks: hi === lo ? ticks.slice(0, 1) : ticks };
}

/** Blue (lowest final return) to red (highest). */
export function returnColor(t: number): string {
  const c = (a: number, b: number) => Math.round(a + (b - a) * Math.min(1, Math.max(0, t)));
  return `rgb(${c(37, 220)}, ${c(99, 38)}, ${c(235, 38)})`;
}

/** One line: its values at the axes' keys and its outcome (null: none yet). */
export interface PcLine {
  id: number;
  point: Record<string, unknown>;
  value: number | null;
  title: string;
}

export interface PcOptions {
  /** The outcome axis's label. */
  valueLabel: string;
  /** Each line carries its id as data-<idAttr> ("group", "trial"). */
  idAttr: string;
  /** Ordinal axes: a key's categories in their order. */
  categories?: Record<string, readonly unknown[]>;
  /** Range axes: a key's searched range (its values are anywhere in it, not on a grid). */
  domains?: Record<string, AxisDomain>;
  valueTick?: (v: number) => string;
  /** A minimised outcome: its lowest value is the best (red). */
  lowerIsBetter?: boolean;
}

export class ParallelCoords {
  readonly root: HTMLElement;

  constructor(parent: HTMLElement) {
    this.root = document.createElement("div");
    this.root.className = "parallel";
    this.root.dataset.chart = "parallel coordinates";
    parent.appendChild(this.root);
  }

  /** A sweep: a line per group through its grid point, coloured by its final mean return. */
  render(groups: readonly GroupSeries[], keys: readonly string[]): void {
    const lines = groups.map((g) => ({
      id: g.index,
      point: g.point,
      value: g.final.mean,
      title: `${g.label || "all seeds"}: final mean ${g.final.mean === null ? "–" : g.final.mean.toFixed(1)}`,
    }));
    this.draw(lines, keys, { valueLabel: "final return", idAttr: "group", valueTick: (v) => v.toFixed(1) });
  }

  draw(lines: readonly PcLine[], keys: readonly string[], opts: PcOptions): void {
    const width = Math.max(360, this.root.clientWidth || 720);
    const known = lines.map((l) => l.value).filter((v): v is number => v !== null && Number.isFinite(v));
    const axes = [
      ...keys.map((k) => {
        const domain = opts.domains?.[k];
        return domain ? rangeAxis(k, domain) : axisFor(k, lines.map((l) => l.point[k]), opts.categories?.[k]);
      }),
      axisFor(opts.valueLabel, known.length ? known : [0]),
    ];
    const x = (i: number) => PAD.side + (i * (width - 2 * PAD.side)) / Math.max(1, axes.length - 1);
    const y = (p: number) => PAD.top + (1 - p) * (HEIGHT - PAD.top - PAD.bottom);
    const [rlo, rhi] = known.length ? [Math.min(...known), Math.max(...known)] : [0, 0];
    const root = svg("svg", { width, height: HEIGHT, viewBox: `0 0 ${width} ${HEIGHT}`, role: "img", "aria-label": `parallel coordinates of the ${keys.join(", ")} and the ${opts.valueLabel}` });
    for (const l of lines) {
      const values = [...keys.map((k) => l.point[k]), l.value];
      const points = axes.map((a, i) => {
        const p = values[i] === null || values[i] === undefined ? null : a.pos(values[i]);
        return p === null ? null : `${x(i).toFixed(1)},${y(p).toFixed(1)}`;
      });
      const t = l.value === null ? 0 : rhi === rlo ? 1 : (l.value - rlo) / (rhi - rlo);
      const color = l.value === null ? "#9ca3af" : returnColor(opts.lowerIsBetter ? 1 - t : t);
      const line = svg("polyline", { points: points.filter(Boolean).join(" "), fill: "none", stroke: color, "stroke-width": 2.5, "stroke-opacity": 0.85, [`data-${opts.idAttr}`]: l.id, "data-color": color });
      if (l.value === null) line.setAttribute("stroke-dasharray", "4 3");
      line.append(svg("title", {}, l.title));
      root.append(line);
    }
    const valueTick = opts.valueTick ?? fmtValue;
    axes.forEach((a, i) => {
      root.append(svg("line", { x1: x(i), x2: x(i), y1: y(0), y2: y(1), class: "axis" }));
      // Centred on its axis, but kept inside the picture (a long name on the first or last axis).
      const half = (a.label.length * LABEL_CHAR_PX) / 2;
      const cx = Math.min(Math.max(x(i), half + 2), width - half - 2);
      root.append(svg("text", { x: cx, y: PAD.top - 12, "text-anchor": "middle", class: "axis-label" }, a.label));
      const ticks = i === axes.length - 1 ? ([[rlo, valueTick(rlo)], [rhi, valueTick(rhi)]] as [unknown, string][]) : a.ticks;
      for (const [v, text] of ticks) {
        const p = a.pos(v);
        if (p !== null) root.append(svg("text", { x: x(i) - 6, y: y(p) + 4, "text-anchor": "end", class: "tick" }, text));
      }
    });
    this.root.replaceChildren(root);
    this.root.dataset.lines = String(lines.length);
  }
}

/**
 * The return distribution of an evaluation: one dot per episode on a return axis (a strip
 * plot, jittered vertically so equal returns stay visible), the mean as a line and mean ± std
 * as a band. Plain SVG: a few hundred dots at most.
 */

const SVG = "http://www.w3.org/2000/svg";

export interface StripLayout {
  lo: number;
  hi: number;
  /** x of each episode's dot, in [pad, width - pad]. */
  xs: number[];
  /** y of each episode's dot (deterministic jitter by episode index). */
  ys: number[];
  mean: number;
  std: number;
  meanX: number;
  bandX0: number;
  bandX1: number;
}

export function mean(values: number[]): number {
  return values.reduce((a, b) => a + b, 0) / values.length;
}

/** Population standard deviation (numpy's default, as the service reports it). */
export function std(values: number[]): number {
  const m = mean(values);
  return Math.sqrt(values.reduce((a, v) => a + (v - m) ** 2, 0) / values.length);
}

export function stripLayout(returns: number[], width: number, height: number, pad = 10): StripLayout | null {
  if (!returns.length) return null;
  const m = mean(returns);
  const s = std(returns);
  let lo = Math.min(...returns, m - s);
  let hi = Math.max(...returns, m + s);
  if (hi - lo < 1e-9) {
    lo -= 1;
    hi += 1;
  }
  const x = (v: number) => pad + ((v - lo) / (hi - lo)) * (width - 2 * pad);
  const mid = height / 2;
  const spread = Math.max(0, height / 2 - pad);
  // Golden-ratio jitter: evenly spread, the same for the same episode index on every render.
  const ys = returns.map((_, i) => mid + (((i * 0.618034) % 1) * 2 - 1) * spread * 0.8);
  return { lo, hi, xs: returns.map(x), ys, mean: m, std: s, meanX: x(m), bandX0: x(m - s), bandX1: x(m + s) };
}

function node<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>): SVGElementTagNameMap[K] {
  const n = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
  return n;
}

export function returnStrip(returns: number[], width = 360, height = 90): SVGSVGElement {
  const svg = node("svg", { viewBox: `0 0 ${width} ${height + 18}`, width, height: height + 18, class: "return-strip", role: "img" });
  const layout = stripLayout(returns, width, height);
  svg.dataset.dots = String(returns.length);
  if (!layout) return svg;
  svg.setAttribute("aria-label", `${returns.length} episode returns, mean ${layout.mean.toFixed(2)} ± ${layout.std.toFixed(2)}`);
  svg.append(
    node("rect", { class: "band", x: layout.bandX0, y: 4, width: Math.max(1, layout.bandX1 - layout.bandX0), height: height - 8 }),
    node("line", { class: "mean", x1: layout.meanX, x2: layout.meanX, y1: 2, y2: height - 2 }),
  );
  layout.xs.forEach((x, i) => {
    const dot = node("circle", { class: "dot", cx: x.toFixed(1), cy: layout.ys[i].toFixed(1), r: 3.5 });
    const title = node("title", {});
    title.textContent = `episode ${i}: ${returns[i]}`;
    dot.append(title);
    svg.append(dot);
  });
  const label = (x: number, text: string, anchor: string) => {
    const t = node("text", { x, y: height + 14, "text-anchor": anchor, class: "axis" });
    t.textContent = text;
    return t;
  };
  svg.append(label(10, fmt(layout.lo), "start"), label(width - 10, fmt(layout.hi), "end"));
  return svg;
}

function fmt(v: number): string {
  return Math.abs(v) >= 1000 || Number.isInteger(v) ? v.toFixed(0) : v.toFixed(2);
}

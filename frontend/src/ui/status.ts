/**
 * Status badges: a colour, an icon and the status name per lifecycle state (never colour alone).
 *
 * Icons are inline SVG drawn in `currentColor`, not text glyphs: symbols such as U+29D7 (the
 * hourglass) are missing from common fonts and render as an empty box in Debian's Chromium.
 */

import type { Status } from "../api/types";
import { el } from "./dom";

const SVG_NS = "http://www.w3.org/2000/svg";

type Shape = [tag: "path" | "circle" | "rect", attrs: Record<string, string | number>];

const FILLED = { fill: "currentColor" };
const OUTLINE = { fill: "none", stroke: "currentColor", "stroke-width": 2, "stroke-linecap": "round", "stroke-linejoin": "round" };

/** Shapes on a 16 x 16 grid. */
const ICONS: Record<Status, Shape[]> = {
  pending: [["circle", { cx: 8, cy: 8, r: 5.5, ...OUTLINE, "stroke-dasharray": "2.6 2.2" }]],
  queued: [["path", { d: "M4 2.5h8M4 13.5h8M5 2.5c0 3 6 3.5 6 5.5s-6 2.5-6 5.5M11 2.5c0 3-6 3.5-6 5.5s6 2.5 6 5.5", ...OUTLINE, "stroke-width": 1.6 }]],
  running: [["path", { d: "M4.5 2.5 13 8l-8.5 5.5z", ...FILLED }]],
  stopping: [
    ["circle", { cx: 8, cy: 8, r: 6, ...OUTLINE, "stroke-width": 1.6 }],
    ["rect", { x: 5.5, y: 5.5, width: 5, height: 5, rx: 0.5, ...FILLED }],
  ],
  succeeded: [["path", { d: "M3 8.5 6.5 12 13 4.5", ...OUTLINE, "stroke-width": 2.2 }]],
  failed: [["path", { d: "M4 4l8 8M12 4l-8 8", ...OUTLINE, "stroke-width": 2.2 }]],
  stopped: [["rect", { x: 3, y: 3, width: 10, height: 10, rx: 1, ...FILLED }]],
};

function icon(status: Status): SVGSVGElement {
  const svg = document.createElementNS(SVG_NS, "svg");
  svg.setAttribute("class", "st-icon");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("width", "1em");
  svg.setAttribute("height", "1em");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  svg.dataset.icon = status;
  for (const [tag, attrs] of ICONS[status] ?? []) {
    const shape = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs)) shape.setAttribute(k, String(v));
    svg.appendChild(shape);
  }
  return svg;
}

/** `label` names the state when it is not the status itself (a study trial's "pruned" wears
 * the `stopped` colour and icon). */
export function statusBadge(status: Status, label: string = status): HTMLSpanElement {
  const span = el("span", { class: `badge st-${status}`, "data-status": status });
  updateBadge(span, status, label);
  return span;
}

export function updateBadge(span: HTMLElement, status: Status, label: string = status): void {
  if (span.dataset.status === status && span.dataset.label === label && span.querySelector(".st-icon")) return;
  span.className = `badge st-${status}`;
  span.dataset.status = status;
  span.dataset.label = label;
  span.replaceChildren(icon(status), el("span", { class: "st-label" }, label));
}

/** The controls shared by the experiment and compare pages: x axis, smoothing, log scale. */

import type { XMode } from "../data/plotData";
import { fmtDuration, fmtSteps } from "../data/format";
import { el } from "./dom";

export interface ChartSettings {
  xMode: XMode;
  smoothing: number;
  log: boolean;
}

export function xAxis(mode: XMode): { xLabel: string; formatX: (v: number) => string } {
  return mode === "time"
    ? { xLabel: "wall time", formatX: (v) => fmtDuration(v) }
    : { xLabel: "env steps", formatX: (v) => fmtSteps(v) };
}

export function chartControls(settings: ChartSettings, onChange: (what: "x" | "smoothing" | "log") => void): HTMLElement {
  const xSel = el(
    "select",
    { name: "xmode", "aria-label": "x axis" },
    el("option", { value: "steps" }, "x: env steps"),
    el("option", { value: "time" }, "x: wall time"),
  );
  xSel.value = settings.xMode;
  xSel.addEventListener("change", () => {
    settings.xMode = xSel.value as XMode;
    onChange("x");
  });
  const smooth = el("input", { type: "range", name: "smoothing", min: 0, max: 0.99, step: 0.01, value: settings.smoothing, "aria-label": "smoothing" });
  const smoothLabel = el("output", {}, settings.smoothing.toFixed(2));
  smooth.addEventListener("input", () => {
    settings.smoothing = Number(smooth.value);
    smoothLabel.textContent = settings.smoothing.toFixed(2);
    onChange("smoothing");
  });
  const log = el("input", { type: "checkbox", name: "log" });
  log.checked = settings.log;
  log.addEventListener("change", () => {
    settings.log = log.checked;
    onChange("log");
  });
  return el(
    "div",
    { class: "toolbar chart-controls" },
    xSel,
    el("label", { title: "Causal exponential moving average: new points never move past ones" }, "smoothing ", smooth, " ", smoothLabel),
    el("label", { title: "Symmetric log (asinh) y scale: works for negative values too" }, log, " log scale"),
    el("span", { class: "muted hint" }, "drag on a chart to zoom (full resolution), double-click to reset"),
  );
}

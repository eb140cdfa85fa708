/** Progress toward the stop criterion, with an ETA while running. */

import type { Experiment } from "../api/types";
import { elapsedSeconds, etaSeconds, fmtDuration } from "../data/format";
import { el, setText } from "./dom";

export function progressBar(): HTMLDivElement {
  return el(
    "div",
    { class: "progress", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": 100 },
    el("div", { class: "progress-fill" }),
    el("span", { class: "progress-label" }),
  );
}

export function updateProgress(bar: HTMLElement, exp: Experiment, now = Date.now()): void {
  const p = Math.max(0, Math.min(1, exp.progress ?? 0));
  const fill = bar.firstElementChild as HTMLElement;
  const width = `${(p * 100).toFixed(1)}%`;
  if (fill.style.width !== width) fill.style.width = width;
  bar.setAttribute("aria-valuenow", (p * 100).toFixed(0));
  bar.dataset.status = exp.status;
  let label = `${(p * 100).toFixed(0)}%`;
  if (exp.status === "running") {
    const eta = etaSeconds(p, elapsedSeconds(exp.started_at, null, now));
    if (eta !== null) label += ` · ETA ${fmtDuration(eta)}`;
  }
  setText(bar.lastElementChild as HTMLElement, label);
}

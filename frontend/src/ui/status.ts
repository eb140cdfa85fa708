/** Status badges: a colour and an icon per lifecycle state (never colour alone). */

import type { Status } from "../api/types";
import { el } from "./dom";

const ICONS: Record<Status, string> = {
  pending: "◌",
  queued: "⧗",
  running: "▶",
  stopping: "◼",
  succeeded: "✔",
  failed: "✖",
  stopped: "■",
};

export function statusBadge(status: Status): HTMLSpanElement {
  const span = el("span", { class: `badge st-${status}`, "data-status": status });
  updateBadge(span, status);
  return span;
}

export function updateBadge(span: HTMLElement, status: Status): void {
  span.className = `badge st-${status}`;
  span.dataset.status = status;
  span.textContent = `${ICONS[status] ?? "?"} ${status}`;
}

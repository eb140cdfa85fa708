/** Read-only parts of the experiment page, re-rendered from the experiment row. */

import type { Experiment, ExperimentEvent } from "../../api/types";
import { elapsedSeconds, fmtDuration, fmtNumber, fmtSteps, fmtTime } from "../../data/format";
import { clear, el, setText } from "../../ui/dom";

export function renderStats(stats: HTMLElement, e: Experiment): void {
  const items: [string, string][] = [
    ["Env steps", fmtSteps(e.env_steps)],
    ["Return (mean)", fmtNumber(e.episode_return_mean)],
    ["Best return", fmtNumber(e.best_return)],
    ["Created", fmtTime(e.created_at)],
    ["Started", fmtTime(e.started_at)],
    ["Duration", fmtDuration(elapsedSeconds(e.started_at, e.finished_at))],
  ];
  if (stats.children.length !== items.length) {
    clear(stats);
    for (const [k] of items) stats.append(el("div", {}, el("dt", {}, k), el("dd", { "data-stat": k })));
  }
  items.forEach(([, v], i) => setText(stats.children[i].lastElementChild as HTMLElement, v));
}

/** A failed experiment shows its error and the tail of its log, above everything else. */
export function renderFailure(box: HTMLElement, e: Experiment): void {
  box.hidden = !(e.status === "failed" || e.error);
  if (box.hidden) return;
  clear(box);
  box.append(el("h2", {}, e.status === "failed" ? "Failed" : "Error"), el("pre", { class: "error-text" }, e.error ?? "(no error message)"));
  if (e.log_tail) box.append(el("h3", {}, "Log tail"), el("pre", { class: "log" }, e.log_tail));
}

export function renderTimeline(list: HTMLElement, events: ExperimentEvent[]): void {
  clear(list);
  for (const ev of events) {
    list.appendChild(
      el(
        "li",
        { "data-to": ev.to_status },
        el("time", {}, fmtTime(ev.at)),
        " ",
        ev.from_status ? el("span", { class: `st-text st-${ev.from_status}` }, ev.from_status) : "",
        ev.from_status ? " → " : "",
        el("span", { class: `st-text st-${ev.to_status}` }, ev.to_status),
        ev.reason ? el("span", { class: "muted reason" }, ` — ${ev.reason}`) : "",
      ),
    );
  }
}

/** "#12 · CartPole-v1 · tags: a · from #7 · resumed as #13": the lineage as links. */
export function metaLine(e: Experiment): (string | Node)[] {
  const parts: (string | Node)[][] = [[`#${e.id}`], [String(e.config?.env_id ?? "")]];
  if (e.tags.length) parts.push([`tags: ${e.tags.join(", ")}`]);
  if (e.parent_id) parts.push(["from ", runLink(e.parent_id, "parent-link")]);
  for (const child of e.children ?? []) {
    const verb = child.kind === "resumed" ? "resumed as " : "forked as ";
    parts.push([verb, runLink(child.id, "child-link", `${child.name} (${child.status})`)]);
  }
  return parts.flatMap((part, i) => (i ? [" · ", ...part] : part));
}

function runLink(id: number, cls: string, title?: string): HTMLElement {
  return el("a", { class: cls, href: `#/experiments/${id}`, ...(title ? { title } : {}) }, `#${id}`);
}

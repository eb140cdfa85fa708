/** The compare page's legend entries and config-difference table. */

import type { Experiment } from "../api/types";
import { diffConfigs } from "../data/configDiff";
import { el } from "./dom";
import { notesLine } from "./experimentRow";
import { statusBadge } from "./status";

export interface Compared {
  exp: Experiment;
  label: string;
  color: string;
}

function swatch(color: string): HTMLElement {
  return el("span", { class: "swatch", style: `background:${color}` });
}

function show(v: unknown): string {
  if (v === undefined) return "(absent)";
  if (v === null) return "none";
  return typeof v === "object" ? JSON.stringify(v) : String(v);
}

/** A legend entry; its status badge is returned too, to be updated live. */
export function legendItem(c: Compared): { li: HTMLElement; badge: HTMLElement } {
  const badge = statusBadge(c.exp.status);
  const li = el(
    "li",
    { "data-id": c.exp.id },
    swatch(c.color),
    el("a", { href: `#/experiments/${c.exp.id}` }, c.label),
    " ",
    badge,
    el("span", { class: "muted" }, ` ${String(c.exp.config?.env_id ?? "")}`),
    c.exp.notes ? el("div", { class: "legend-notes muted", "data-role": "notes", title: c.exp.notes }, notesLine(c.exp.notes)) : null,
  );
  return { li, badge };
}

/** One row per config field that differs, one column per experiment. */
export function diffTable(items: Compared[]): HTMLElement {
  const rows = diffConfigs(items.map((c) => c.exp.config ?? {}));
  if (!rows.length) return el("p", { class: "muted" }, "The configs are identical.");
  return el(
    "table",
    { class: "diff" },
    el("thead", {}, el("tr", {}, el("th", {}, "field"), items.map((c) => el("th", {}, swatch(c.color), c.label)))),
    el("tbody", {}, rows.map((r) => el("tr", { "data-path": r.path }, el("td", { class: "path" }, r.path), r.values.map((v) => el("td", {}, show(v)))))),
  );
}

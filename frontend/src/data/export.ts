/**
 * Metrics export, as `rollout metrics ID --csv | --json` writes it: every stored point (a
 * series the service thinned for one response is fetched again in halved step windows), as a
 * CSV table (a row per env step, a column per series, empty where a series has no point) or as
 * JSON ({experiment_id, series: {name: {step, value}}}).
 */

import type { Columns, MetricsResponse } from "../api/types";

/** What the export needs of the API: GET .../metrics for some names within a step range. */
export type FetchMetrics = (names: string[], stepMin?: number, stepMax?: number) => Promise<MetricsResponse & { downsampled?: Record<string, boolean> }>;

const NAMES_PER_REQUEST = 8;

export async function allSeries(fetchMetrics: FetchMetrics, names: string[]): Promise<Record<string, Columns>> {
  const out: Record<string, Columns> = {};
  for (let i = 0; i < names.length; i += NAMES_PER_REQUEST) {
    const resp = await fetchMetrics(names.slice(i, i + NAMES_PER_REQUEST));
    for (const [name, cols] of Object.entries(resp.series)) {
      out[name] = resp.downsampled?.[name] && cols.step.length ? await whole(fetchMetrics, name, cols.step[0], cols.step[cols.step.length - 1]) : cols;
    }
  }
  return out;
}

async function whole(fetchMetrics: FetchMetrics, name: string, lo: number, hi: number): Promise<Columns> {
  const resp = await fetchMetrics([name], lo, hi);
  const cols = resp.series[name] ?? { step: [], value: [] };
  if (!resp.downsampled?.[name] || hi <= lo) return cols;
  const mid = Math.floor((lo + hi) / 2);
  const [a, b] = [await whole(fetchMetrics, name, lo, mid), await whole(fetchMetrics, name, mid + 1, hi)];
  return { step: [...a.step, ...b.step], value: [...a.value, ...b.value] };
}

export function toCsv(series: Record<string, Columns>): string {
  const names = Object.keys(series).sort();
  const byStep = new Map<number, (number | null)[]>();
  names.forEach((name, col) => {
    const { step, value } = series[name];
    step.forEach((s, i) => {
      let row = byStep.get(s);
      if (!row) byStep.set(s, (row = names.map(() => null)));
      row[col] = value[i];
    });
  });
  const lines = [["step", ...names].map(csvText).join(",")];
  for (const s of [...byStep.keys()].sort((a, b) => a - b)) {
    lines.push([String(s), ...(byStep.get(s) as (number | null)[]).map((v) => (v === null || v === undefined ? "" : String(v)))].join(","));
  }
  return lines.join("\n") + "\n";
}

export function toJson(experimentId: number, series: Record<string, Columns>): string {
  const sorted = Object.fromEntries(Object.keys(series).sort().map((n) => [n, series[n]]));
  return JSON.stringify({ experiment_id: experimentId, series: sorted }) + "\n";
}

function csvText(s: string): string {
  return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

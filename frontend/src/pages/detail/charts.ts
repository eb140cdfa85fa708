/**
 * The experiment page's chart grid: one uPlot chart per chart definition, created once and fed
 * from the feed's store; x axis, smoothing and log scale controls; synced zoom that fetches the
 * zoomed range of every series at full resolution; the reference curves of the experiment's env
 * (toggled) on the episode return chart.
 */

import { api, saveText } from "../../api/client";
import type { ExperimentFeed } from "../../api/feed";
import { allSeries, toCsv, toJson } from "../../data/export";
import { withOverlay } from "../../data/overlay";
import { plotData, WALL_TIME } from "../../data/plotData";
import { interpolate, inverseInterpolate } from "../../data/series";
import { MetricChart, PALETTE } from "../../ui/chart";
import { chartControls, xAxis, type ChartSettings } from "../../ui/chartControls";
import { el, frameScheduler } from "../../ui/dom";
import { ReferenceOverlay } from "../../ui/referenceOverlay";
import { allMetricNames, CHARTS, type ChartDef } from "../chartDefs";

interface View {
  def: ChartDef;
  chart: MetricChart;
  /** A chart the user added (one metric), not one of CHARTS. */
  extra?: boolean;
}

/** Which charts the user chose, kept in this browser for every experiment page. */
interface ChartChoice {
  hidden: string[];
  extra: string[];
}

const CHOICE_KEY = "rollout.charts.v1";

function loadChoice(): ChartChoice {
  try {
    const raw = JSON.parse(localStorage.getItem(CHOICE_KEY) ?? "{}") as Partial<ChartChoice>;
    const strings = (v: unknown) => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []);
    return { hidden: strings(raw.hidden), extra: strings(raw.extra) };
  } catch {
    return { hidden: [], extra: [] };
  }
}

function saveChoice(choice: ChartChoice): void {
  try {
    localStorage.setItem(CHOICE_KEY, JSON.stringify(choice));
  } catch {
    // storage full or off: the choice lasts for this page only
  }
}

export class ChartsPanel {
  readonly root: HTMLElement;
  private readonly settings: ChartSettings = { xMode: "steps", smoothing: 0, log: false };
  private readonly views: View[] = [];
  private readonly changed = new Set<string>();
  private lastZoom = "";
  private readonly flush = frameScheduler(() => this.redrawChanged());
  private readonly overlay = new ReferenceOverlay(() => this.redrawOverlaid());
  private readonly grid: HTMLElement;
  private readonly none = el("p", { class: "muted", "data-role": "no-metrics", hidden: true });

  constructor(
    private readonly feed: ExperimentFeed,
    private readonly onError: (e: unknown) => void,
  ) {
    const grid = el("div", { class: "charts" });
    this.grid = grid;
    const controls = chartControls(this.settings, (what) => {
      if (what !== "smoothing") for (const v of this.views) v.chart.reconfigure({ log: this.settings.log, ...xAxis(this.settings.xMode) });
      this.redrawAll();
      this.placeMarker();
    });
    const exports = el(
      "span",
      { class: "export" },
      "export ",
      el("button", { type: "button", class: "btn small secondary", "data-action": "export-csv", title: "Every stored point of every series: a row per env step", onclick: () => void this.exportAs("csv") }, "CSV"),
      el("button", { type: "button", class: "btn small secondary", "data-action": "export-json", title: "Every stored point of every series, as the API sends them", onclick: () => void this.exportAs("json") }, "JSON"),
    );
    controls.appendChild(exports);
    this.root = el("section", { class: "panel" }, el("h2", {}, "Metrics"), controls, this.picker, this.overlay.root, this.none, grid);
    this.views.push(...CHARTS.map((def) => ({ def, chart: this.makeChart(grid, def) })));
    for (const v of this.views) v.chart.root.hidden = this.choice.hidden.includes(v.def.title);
    for (const name of this.choice.extra) this.addExtra(name, false);
    this.picker.addEventListener("toggle", () => {
      if (this.picker.open) void this.fillPicker();
    });
  }

  // --- which charts: the default ones (each can be hidden) and any other logged metric -------
  private readonly choice = loadChoice();
  private readonly picker = el("details", { class: "chart-picker", "data-role": "chart-picker" }, el("summary", {}, "Choose charts"), el("div", { class: "picker-body" }));

  /** Every default chart and every logged metric the defaults leave out, as checkboxes. */
  private async fillPicker(): Promise<void> {
    const body = this.picker.querySelector(".picker-body") as HTMLElement;
    let logged: string[] = this.feed.store.names();
    try {
      logged = (await api.metricNames(this.feed.id)).names;
    } catch (e) {
      this.onError(e);
    }
    const plotted = new Set(allMetricNames());
    const others = [...new Set([...logged, ...this.choice.extra])].filter((n) => !plotted.has(n) && n !== WALL_TIME).sort();
    const box = (name: string, label: string, checked: boolean, onChange: (on: boolean) => void) => {
      const input = el("input", { type: "checkbox", name, "data-metric": name });
      input.checked = checked;
      input.addEventListener("change", () => onChange(input.checked));
      return el("label", {}, input, ` ${label}`);
    };
    body.replaceChildren(
      el("div", { class: "picker-group" }, el("strong", {}, "Charts"), ...this.views.filter((v) => !v.extra).map((v) => box(`chart:${v.def.title}`, v.def.title, !v.chart.root.hidden, (on) => this.showDefault(v, on)))),
      el("div", { class: "picker-group" }, el("strong", {}, "Other metrics"), others.length ? others.map((n) => box(n, n, this.choice.extra.includes(n), (on) => (on ? this.addExtra(n, true) : this.removeExtra(n)))) : el("span", { class: "muted" }, "none logged")),
    );
  }

  private showDefault(v: View, on: boolean): void {
    v.chart.root.hidden = !on;
    this.choice.hidden = on ? this.choice.hidden.filter((t) => t !== v.def.title) : [...new Set([...this.choice.hidden, v.def.title])];
    saveChoice(this.choice);
    if (on) this.redraw(v);
  }

  /** A chart of one more metric; its history is fetched, live points arrive with the rest. */
  private addExtra(name: string, save: boolean): void {
    if (this.views.some((v) => v.extra && v.def.lines[0].name === name)) return;
    const def: ChartDef = { title: name, lines: [{ name, label: name }] };
    const view: View = { def, chart: this.makeChart(this.grid, def), extra: true };
    this.views.push(view);
    if (save) {
      this.choice.extra = [...new Set([...this.choice.extra, name])];
      saveChoice(this.choice);
    }
    this.feed
      .loadHistory([name])
      .then(() => this.redraw(view))
      .catch(this.onError);
  }

  private removeExtra(name: string): void {
    const i = this.views.findIndex((v) => v.extra && v.def.lines[0].name === name);
    if (i >= 0) this.views.splice(i, 1)[0].chart.destroy();
    this.choice.extra = this.choice.extra.filter((n) => n !== name);
    saveChoice(this.choice);
  }

  /** Every series some shown chart plots, and wall time. */
  private plottedNames(): string[] {
    return [...new Set([WALL_TIME, ...this.views.flatMap((v) => v.def.lines.map((l) => l.name))])];
  }

  /** The chart the reference curves go on: the one that plots their metric. */
  private overlaid(): View | undefined {
    return this.views.find((v) => v.def.lines.some((l) => l.name === ReferenceOverlay.METRIC));
  }

  /** Offer the reference curves shipped for this env id (once the experiment is known). */
  async setEnv(envId: string): Promise<void> {
    const view = this.overlaid();
    if (!view) return;
    await this.overlay.load(view.chart, [envId]);
    if (this.overlay.count) this.redraw(view);
  }

  private redrawOverlaid(): void {
    const view = this.overlaid();
    if (view) this.redraw(view);
  }

  private makeChart(grid: HTMLElement, def: ChartDef): MetricChart {
    const inBand = (name: string) => Boolean(def.band?.includes(name));
    const index = (name: string | undefined) => def.lines.findIndex((l) => l.name === name) + 1;
    return new MetricChart(grid, {
      title: def.title,
      lines: def.lines.map((l, i) => ({ label: l.label, color: inBand(l.name) ? PALETTE[0] : PALETTE[i % PALETTE.length], bandEdge: inBand(l.name) })),
      band: def.band ? [index(def.band[0]), index(def.band[1])] : undefined,
      log: this.settings.log,
      ...xAxis(this.settings.xMode),
      syncKey: `experiment-${this.feed.id}`,
      onZoom: (lo, hi) => void this.zoom(lo, hi),
      onResetZoom: () => this.resetZoom(),
    });
  }

  /** New points arrived for these series: redraw their charts on the next frame. */
  update(names: string[]): void {
    for (const n of names) this.changed.add(n);
    if (names.length) this.showEmpty(null);
    this.flush();
  }

  /** A run that ended without a metric gets one line instead of a grid of empty charts;
   * `message` null shows the charts. Ignored once any point is held. */
  showEmpty(message: string | null): void {
    const empty = message !== null && this.feed.store.size() === 0;
    this.none.hidden = !empty;
    this.none.textContent = empty ? message : "";
    this.grid.hidden = empty;
  }

  private redraw(v: View): void {
    const names = v.def.lines.map((l) => l.name);
    const { xMode, smoothing } = this.settings;
    const data = plotData((n) => this.feed.store.get(n), names, xMode, smoothing, Boolean(v.def.band));
    if (this.overlay.count === 0 || v !== this.overlaid()) return v.chart.setData(data);
    const own = v.def.band ? v.def.band.map((n) => names.indexOf(n) + 1) : [];
    v.chart.setData(withOverlay(data, this.overlay.tables(xMode), [...own, ...this.overlay.edges()]));
  }

  private redrawAll(): void {
    for (const v of this.views) if (!v.chart.root.hidden) this.redraw(v);
  }

  private redrawChanged(): void {
    const all = this.changed.has(WALL_TIME) && this.settings.xMode === "time";
    for (const v of this.views) if (!v.chart.root.hidden && (all || v.def.lines.some((l) => this.changed.has(l.name)))) this.redraw(v);
    this.changed.clear();
  }

  // The charts share a cursor sync key, so uPlot zooms them all together: fetch every series of
  // the range once, and keep all of them zoomed until a double-click resets all.
  private resetZoom(): void {
    this.lastZoom = "";
    for (const v of this.views) v.chart.resetZoom();
  }

  private async zoom(lo: number, hi: number): Promise<void> {
    for (const v of this.views) v.chart.zoomed = true;
    let [a, b] = [lo, hi];
    if (this.settings.xMode === "time") {
      const wall = this.feed.store.get(WALL_TIME);
      a = inverseInterpolate(wall, lo) ?? lo;
      b = inverseInterpolate(wall, hi) ?? hi;
    }
    const [stepMin, stepMax] = [Math.max(0, Math.floor(a)), Math.ceil(b)];
    // A synced chart without points (a metric this run never logs) reports no range.
    if (!Number.isFinite(stepMin) || !Number.isFinite(stepMax) || stepMax < stepMin) return;
    const key = `${stepMin}:${stepMax}`;
    if (key === this.lastZoom) return; // the same drag, reported by another synced chart
    this.lastZoom = key;
    try {
      await this.feed.zoom(stepMin, stepMax, this.plottedNames());
    } catch (e) {
      this.onError(e);
    }
  }

  /** Download every metric at full resolution (what `rollout metrics ID --csv|--json` writes). */
  private async exportAs(format: "csv" | "json"): Promise<void> {
    const id = this.feed.id;
    try {
      const { names } = await api.metricNames(id);
      const series = await allSeries((batch, lo, hi) => api.metrics(id, batch, undefined, lo, hi), names);
      if (format === "csv") saveText(toCsv(series), `experiment-${id}-metrics.csv`, "text/csv");
      else saveText(toJson(id, series), `experiment-${id}-metrics.json`, "application/json");
    } catch (e) {
      this.onError(e);
    }
  }

  // --- the filmstrip's selected step, marked on the return curve ----------------------------
  private markedStep: number | null = null;

  /** Mark env step `step` (null: none) on the episode-return chart, in either x mode. */
  markStep(step: number | null): void {
    this.markedStep = step;
    this.placeMarker();
  }

  private placeMarker(): void {
    const view = this.views.find((v) => v.def.lines.some((l) => l.name === "episode_return_mean"));
    if (!view) return;
    const step = this.markedStep;
    const x = step === null ? null : this.settings.xMode === "time" ? interpolate(this.feed.store.get(WALL_TIME), step) : step;
    view.chart.setMarker(x);
  }

  destroy(): void {
    for (const v of this.views) v.chart.destroy();
  }
}

/**
 * Compare page: several experiments overlaid, one chart per metric with one line per experiment,
 * each continued live by its own stream, and a table of the config fields that differ. The
 * reference curves of the experiments' env ids can be overlaid on the episode return chart.
 */

import { api, ApiError } from "../api/client";
import { ExperimentFeed } from "../api/feed";
import type { Experiment } from "../api/types";
import { alignSeries, type XY } from "../data/align";
import { groupColumns, groupRuns, type RunGroup } from "../data/groupRuns";
import { withOverlay } from "../data/overlay";
import { plotData, WALL_TIME } from "../data/plotData";
import { inverseInterpolate } from "../data/series";
import { MetricChart, PALETTE } from "../ui/chart";
import { chartControls, xAxis, type ChartSettings } from "../ui/chartControls";
import { trackStream, untrackStream } from "../ui/conn";
import { el, frameScheduler } from "../ui/dom";
import { diffTable, legendItem } from "../ui/compareParts";
import { ReferenceOverlay } from "../ui/referenceOverlay";
import { updateBadge } from "../ui/status";
import { COMPARE_METRICS } from "./chartDefs";

export function mountCompare(root: HTMLElement, query: URLSearchParams): () => void {
  document.title = "Compare · Rollout";
  const ids = [...new Set((query.get("ids") ?? "").split(",").filter((s) => /^\d+$/.test(s)).map(Number))];
  const settings: ChartSettings = { xMode: "steps", smoothing: 0, log: false };
  let closed = false;
  const notice = el("p", { class: "error-box", hidden: true });
  const legend = el("ul", { class: "legend" });
  const diffBox = el("div", { class: "table-wrap" });
  const chartsGrid = el("div", { class: "charts" });
  const groupBox = el("input", { type: "checkbox", name: "group-seeds" });
  const overlay = new ReferenceOverlay(() => redraw(ReferenceOverlay.METRIC));
  const controls = chartControls(settings, (what) => {
    if (what !== "smoothing") for (const c of charts.values()) c.reconfigure({ log: settings.log, ...xAxis(settings.xMode) });
    redrawAll();
  });
  root.appendChild(
    el(
      "div",
      { class: "compare" },
      el("section", { class: "panel" }, el("div", { class: "page-head" }, el("h1", {}, `Compare ${ids.length} experiments`), el("a", { href: "#/" }, "Back to experiments")), notice, legend),
      el(
        "section",
        { class: "panel" },
        el("h2", {}, "Metrics"),
        controls,
        el("label", { class: "group-toggle", title: "Runs whose configs are equal but for the seed: their mean as a line, min–max as a band" }, groupBox, " Group runs that differ only in their seed"),
        overlay.root,
        chartsGrid,
      ),
      el("section", { class: "panel" }, el("h2", {}, "Config differences"), diffBox),
    ),
  );
  if (ids.length < 1) {
    notice.hidden = false;
    notice.textContent = "Select experiments to compare on the experiments page.";
    return () => undefined;
  }

  const exps = new Map<number, Experiment>();
  const badges = new Map<number, HTMLElement>();
  const label = (id: number) => `#${id} ${exps.get(id)?.name ?? ""}`.trim();
  const colorOf = (id: number) => (grouped ? PALETTE[groups.findIndex((g) => g.members.includes(ids.indexOf(id))) % PALETTE.length] : PALETTE[ids.indexOf(id) % PALETTE.length]);
  // ?group=seeds: runs that differ only in their seed are one group (mean and min-max band).
  const grouped = query.get("group") === "seeds";
  let groups: RunGroup[] = [];
  groupBox.checked = grouped;
  groupBox.addEventListener("change", () => {
    const q = new URLSearchParams(query);
    if (groupBox.checked) q.set("group", "seeds");
    else q.delete("group");
    location.hash = `#/compare?${q.toString().replace(/%2C/gi, ",")}`;
  });
  const charts = new Map<string, MetricChart>();
  const feeds: ExperimentFeed[] = [];
  const keys = ids.map(() => ({}));

  function makeCharts(): void {
    const lines = grouped
      ? groups.flatMap((g, i) => {
          const color = PALETTE[i % PALETTE.length];
          const name = `${g.label} (${g.members.length})`;
          return [{ label: `${name} mean`, color }, { label: `${name} max`, color, bandEdge: true }, { label: `${name} min`, color, bandEdge: true }];
        })
      : ids.map((id) => ({ label: label(id), color: colorOf(id) }));
    for (const [metric, title] of COMPARE_METRICS) {
      const chart = new MetricChart(chartsGrid, {
        title,
        lines,
        bands: grouped ? groups.map((_, i): [number, number] => [2 + 3 * i, 3 + 3 * i]) : undefined,
          log: settings.log,
          ...xAxis(settings.xMode),
          syncKey: "compare",
        onZoom: (lo, hi) => void zoom(lo, hi),
        onResetZoom: () => resetZoom(),
      });
      chart.root.dataset.groups = String(grouped ? groups.length : 0);
      charts.set(metric, chart);
    }
  }

  function redraw(metric: string): void {
    const tables: XY[] = feeds.map((f) => {
      const [x, y] = plotData((n) => f.store.get(n), [metric], settings.xMode, settings.smoothing);
      return { x, y };
    });
    const aligned = grouped ? groupColumns(tables, groups) : alignSeries(tables);
    const own = grouped ? groups.flatMap((_, i) => [2 + 3 * i, 3 + 3 * i]) : [];
    const overlaid = metric === ReferenceOverlay.METRIC && overlay.count > 0;
    charts.get(metric)?.setData(overlaid ? withOverlay(aligned, overlay.tables(settings.xMode), [...own, ...overlay.edges()]) : aligned);
  }
  function redrawAll(): void {
    for (const m of charts.keys()) redraw(m);
  }
  const changed = new Set<string>();
  const flush = frameScheduler(() => {
    const all = changed.has(WALL_TIME) && settings.xMode === "time";
    for (const m of charts.keys()) if (all || changed.has(m)) redraw(m);
    changed.clear();
  });

  // Synced charts zoom together (see the experiment page): one fetch per experiment.
  let lastZoom = "";
  function resetZoom(): void {
    lastZoom = "";
    for (const c of charts.values()) c.resetZoom();
  }

  async function zoom(lo: number, hi: number): Promise<void> {
    const key = `${Math.floor(lo)}:${Math.ceil(hi)}`;
    if (key === lastZoom) return; // the same drag, reported by another synced chart
    lastZoom = key;
    for (const c of charts.values()) c.zoomed = true;
    try {
      await Promise.all(
        feeds.map((f) => {
          let a = lo;
          let b = hi;
          if (settings.xMode === "time") {
            const wall = f.store.get(WALL_TIME);
            a = inverseInterpolate(wall, lo) ?? lo;
            b = inverseInterpolate(wall, hi) ?? hi;
          }
          return f.zoom(Math.max(0, Math.floor(a)), Math.ceil(b), [...COMPARE_METRICS.map(([m]) => m), WALL_TIME]);
        }),
      );
    } catch (e) {
      notice.hidden = false;
      notice.textContent = e instanceof ApiError ? e.message : String(e);
    }
  }

  function renderHeader(): void {
    const items = ids.map((id) => ({ exp: exps.get(id) as Experiment, label: label(id), color: colorOf(id) }));
    legend.replaceChildren(
      ...items.map((c) => {
        const { li, badge } = legendItem(c);
        badges.set(c.exp.id, badge);
        return li;
      }),
    );
    diffBox.replaceChildren(diffTable(items));
  }

  void (async () => {
    try {
      const list = await Promise.all(ids.map((id) => api.get(id)));
      if (closed) return;
      for (const e of list) exps.set(e.id, e);
      groups = groupRuns(list.map((e) => e.config ?? {}));
      renderHeader();
      makeCharts();
      const returnChart = charts.get(ReferenceOverlay.METRIC);
      const envIds = list.map((e) => e.config.env_id).filter((v): v is string => typeof v === "string");
      if (returnChart) {
        overlay
          .load(returnChart, envIds)
          .then(() => redraw(ReferenceOverlay.METRIC))
          .catch((e: unknown) => {
            notice.hidden = false;
            notice.textContent = e instanceof ApiError ? e.message : String(e);
          });
      }
      ids.forEach((id, i) => {
        trackStream(keys[i], null);
        const feed = new ExperimentFeed(id, [...COMPARE_METRICS.map(([m]) => m), WALL_TIME], {
          onMetrics: (names) => {
            for (const n of names) changed.add(n);
            flush();
          },
          onExperiment: (e) => {
            exps.set(e.id, e);
            const b = badges.get(e.id);
            if (b) updateBadge(b, e.status);
          },
          onStatus: (m) => {
            const b = badges.get(m.experiment_id);
            if (b) updateBadge(b, m.status);
          },
          onState: (online) => trackStream(keys[i], online),
        });
        feeds.push(feed);
      });
      await Promise.all(feeds.map((f) => f.start()));
    } catch (e) {
      if (closed) return;
      notice.hidden = false;
      notice.textContent = e instanceof ApiError ? e.message : String(e);
    }
  })();

  return () => {
    closed = true;
    for (const f of feeds) f.close();
    for (const k of keys) untrackStream(k);
    for (const c of charts.values()) c.destroy();
  };
}

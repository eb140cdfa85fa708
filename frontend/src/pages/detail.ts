/**
 * Experiment page: live charts fed by the experiment's stream, status timeline, config, live log
 * tail, checkpoints with downloads, and the actions (stop, resume, fork, delete).
 */

import { api, ApiError, apiToken, checkpointDownloadUrl, downloadWithToken } from "../api/client";
import { ExperimentFeed } from "../api/feed";
import { FINISHED, type Checkpoint, type Experiment } from "../api/types";
import { elapsedSeconds, fmtBytes, fmtClock, fmtDuration, fmtNumber, fmtSteps, fmtTime } from "../data/format";
import { inverseInterpolate } from "../data/series";
import { plotData, WALL_TIME } from "../data/plotData";
import { MetricChart, PALETTE } from "../ui/chart";
import { chartControls, xAxis, type ChartSettings } from "../ui/chartControls";
import { trackStream, untrackStream } from "../ui/conn";
import { clear, el, frameScheduler, setText } from "../ui/dom";
import { progressBar, updateProgress } from "../ui/progress";
import { statusBadge, updateBadge } from "../ui/status";
import { allMetricNames, CHARTS, type ChartDef } from "./chartDefs";

const MAX_LOG_LINES = 1000;

export function mountDetail(root: HTMLElement, id: number): () => void {
  document.title = `Experiment ${id} · Rollout`;
  let exp: Experiment | null = null;
  let closed = false;
  let checkpointCount = 0;
  const settings: ChartSettings = { xMode: "steps", smoothing: 0, log: false };

  // ---- skeleton ---------------------------------------------------------------------------
  const title = el("h1", {}, `Experiment ${id}`);
  const badge = statusBadge("pending");
  const meta = el("p", { class: "muted meta" });
  const actions = el("div", { class: "actions" });
  const bar = progressBar();
  const stats = el("dl", { class: "stats" });
  const failure = el("section", { class: "panel failure", hidden: true });
  const notice = el("p", { class: "error-box", hidden: true });
  const chartsGrid = el("div", { class: "charts" });
  const timeline = el("ol", { class: "timeline" });
  const ckptBody = el("tbody");
  const ckptEmpty = el("p", { class: "muted" }, "No checkpoint yet.");
  const ckptLinks = el("div", { class: "actions" });
  const configPre = el("pre", { class: "config" });
  const logPre = el("pre", { class: "log", "aria-live": "polite" });

  const controls = chartControls(settings, (what) => {
    if (what === "smoothing") redrawAll();
    else {
      for (const v of views) v.chart.reconfigure({ log: settings.log, ...xAxis(settings.xMode) });
      redrawAll();
    }
  });

  root.appendChild(
    el(
      "div",
      { class: "detail" },
      el(
        "section",
        { class: "panel" },
        el("div", { class: "page-head" }, el("div", { class: "title-line" }, title, badge), actions),
        meta,
        bar,
        stats,
        notice,
      ),
      failure,
      el("section", { class: "panel" }, el("h2", {}, "Metrics"), controls, chartsGrid),
      el(
        "div",
        { class: "two-col" },
        el("section", { class: "panel" }, el("h2", {}, "Status timeline"), timeline),
        el(
          "section",
          { class: "panel" },
          el("h2", {}, "Checkpoints"),
          ckptLinks,
          el(
            "div",
            { class: "table-wrap" },
            el(
              "table",
              { class: "checkpoints" },
              el("thead", {}, el("tr", {}, ["Iteration", "Env steps", "Return", "Size", "Saved", "", ""].map((h) => el("th", {}, h)))),
              ckptBody,
            ),
          ),
          ckptEmpty,
        ),
      ),
      el("section", { class: "panel" }, el("h2", {}, "Log"), logPre),
      el("section", { class: "panel" }, el("details", {}, el("summary", {}, "Config"), configPre)),
    ),
  );

  // ---- charts -----------------------------------------------------------------------------
  interface View {
    def: ChartDef;
    chart: MetricChart;
  }
  const views: View[] = CHARTS.map((def) => {
    const lines = def.lines.map((l, i) => ({
      label: l.label,
      color: def.band && def.band.includes(l.name) ? PALETTE[0] : PALETTE[i % PALETTE.length],
      bandEdge: Boolean(def.band?.includes(l.name)),
    }));
    const band = def.band ? ([def.lines.findIndex((l) => l.name === def.band?.[0]) + 1, def.lines.findIndex((l) => l.name === def.band?.[1]) + 1] as [number, number]) : undefined;
    const view: View = {
      def,
      chart: new MetricChart(chartsGrid, {
        title: def.title,
        lines,
        band,
        log: settings.log,
        ...xAxis(settings.xMode),
        syncKey: `experiment-${id}`,
        onZoom: (lo, hi) => void zoom(lo, hi),
        onResetZoom: () => resetZoom(),
      }),
    };
    return view;
  });

  const changed = new Set<string>();
  const redraw = (v: View) => v.chart.setData(plotData((n) => feed.store.get(n), v.def.lines.map((l) => l.name), settings.xMode, settings.smoothing, Boolean(v.def.band)));
  function redrawAll(): void {
    for (const v of views) redraw(v);
  }
  const flushCharts = frameScheduler(() => {
    const timeChanged = changed.has(WALL_TIME) && settings.xMode === "time";
    for (const v of views) if (timeChanged || v.def.lines.some((l) => changed.has(l.name))) redraw(v);
    changed.clear();
  });

  // The charts share a cursor sync key, so uPlot zooms them all together: fetch every series of
  // the range once, and keep all of them zoomed until a double-click resets all.
  let lastZoom = "";
  function resetZoom(): void {
    lastZoom = "";
    for (const v of views) v.chart.resetZoom();
  }

  async function zoom(lo: number, hi: number): Promise<void> {
    for (const v of views) v.chart.zoomed = true;
    let a = lo;
    let b = hi;
    if (settings.xMode === "time") {
      const wall = feed.store.get(WALL_TIME);
      a = inverseInterpolate(wall, lo) ?? lo;
      b = inverseInterpolate(wall, hi) ?? hi;
    }
    const [stepMin, stepMax] = [Math.max(0, Math.floor(a)), Math.ceil(b)];
    const key = `${stepMin}:${stepMax}`;
    if (key === lastZoom) return; // the same drag, reported by another synced chart
    lastZoom = key;
    try {
      await feed.zoom(stepMin, stepMax, allMetricNames());
    } catch (e) {
      showNotice(e);
    }
  }

  // ---- experiment state -----------------------------------------------------------------------
  function showNotice(e: unknown): void {
    notice.hidden = false;
    notice.textContent = e instanceof ApiError ? e.message : String(e);
  }

  function renderActions(e: Experiment): void {
    clear(actions);
    if (!FINISHED.has(e.status)) {
      actions.appendChild(
        el("button", { type: "button", class: "btn danger", "data-action": "stop", disabled: e.status === "stopping", onclick: () => void act(() => api.stop(id)) }, e.status === "stopping" ? "Stopping…" : "Stop"),
      );
    } else {
      actions.appendChild(
        el("button", {
          type: "button",
          class: "btn secondary",
          "data-action": "resume",
          hidden: checkpointCount === 0,
          title: "A new experiment that continues from the latest checkpoint",
          onclick: () =>
            void act(async () => {
              const created = await api.resume(id);
              location.hash = `#/experiments/${created.id}`;
              return created;
            }),
        }, "Resume"),
      );
      actions.appendChild(
        el("button", {
          type: "button",
          class: "btn secondary",
          "data-action": "delete",
          onclick: () => {
            if (!confirm(`Delete experiment “${e.name}” with its metrics and checkpoints?`)) return;
            void act(async () => {
              await api.remove(id);
              location.hash = "#/";
              return undefined;
            });
          },
        }, "Delete"),
      );
    }
    actions.appendChild(el("a", { class: "btn secondary", href: `#/new?from=${id}`, title: "A new experiment with this config, edited first" }, "Fork"));
  }

  async function act(fn: () => Promise<unknown>): Promise<void> {
    try {
      notice.hidden = true;
      const res = await fn();
      if (res && typeof res === "object" && "status" in res && (res as Experiment).id === id) applyExperiment(res as Experiment);
    } catch (e) {
      showNotice(e);
    }
  }

  function renderStats(e: Experiment): void {
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

  function renderFailure(e: Experiment): void {
    failure.hidden = !(e.status === "failed" || e.error);
    if (failure.hidden) return;
    clear(failure);
    failure.append(el("h2", {}, e.status === "failed" ? "Failed" : "Error"), el("pre", { class: "error-text" }, e.error ?? "(no error message)"));
    if (e.log_tail) failure.append(el("h3", {}, "Log tail"), el("pre", { class: "log" }, e.log_tail));
  }

  function renderTimeline(e: Experiment): void {
    if (!e.events) return;
    clear(timeline);
    for (const ev of e.events) {
      timeline.appendChild(
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

  let lastStatus: string | null = null;
  function applyExperiment(e: Experiment): void {
    const statusChanged = exp?.status !== e.status;
    exp = { ...e, events: e.events ?? exp?.events };
    document.title = `${e.name} · Rollout`;
    setText(title, e.name);
    updateBadge(badge, e.status);
    meta.textContent = `#${e.id} · ${String(e.config?.env_id ?? "")}${e.tags.length ? ` · tags: ${e.tags.join(", ")}` : ""}${e.parent_id ? ` · from #${e.parent_id}` : ""}`;
    updateProgress(bar, exp);
    renderStats(exp);
    renderFailure(exp);
    renderTimeline(exp);
    if (statusChanged || lastStatus === null) renderActions(exp);
    if (!configPre.textContent) configPre.textContent = JSON.stringify(e.config, null, 2);
    if (statusChanged && lastStatus !== null) void refreshCheckpoints();
    lastStatus = e.status;
  }

  async function refreshExperiment(): Promise<void> {
    try {
      const e = await api.get(id);
      if (!closed) applyExperiment(e);
    } catch (e) {
      if (!closed) showNotice(e);
    }
  }

  // Stats (progress, env steps, best return) come from the experiment row: refresh it at most
  // every 2 s while metrics flow instead of on every message.
  let refreshTimer: ReturnType<typeof setTimeout> | null = null;
  function scheduleRefresh(): void {
    if (refreshTimer !== null) return;
    refreshTimer = setTimeout(() => {
      refreshTimer = null;
      void refreshExperiment();
    }, 2000);
  }

  // ---- checkpoints ------------------------------------------------------------------------------
  function downloadLink(cid: number | "best" | "latest", label: string, cls: string): HTMLAnchorElement {
    const href = checkpointDownloadUrl(id, cid);
    const a = el("a", { class: cls, href, download: "", "data-download": String(cid) }, label);
    a.addEventListener("click", (ev) => {
      if (!apiToken()) return; // the browser streams it to disk itself
      ev.preventDefault();
      downloadWithToken(href, `experiment-${id}-checkpoint-${cid}.tar.gz`).catch(showNotice);
    });
    return a;
  }

  function renderCheckpoints(list: Checkpoint[]): void {
    checkpointCount = list.length;
    const resume = actions.querySelector<HTMLElement>("[data-action=resume]");
    if (resume) resume.hidden = list.length === 0;
    clear(ckptBody);
    clear(ckptLinks);
    ckptEmpty.hidden = list.length > 0;
    if (list.length) {
      ckptLinks.append(
        downloadLink("best", "⬇ Best", "btn secondary"),
        downloadLink("latest", "⬇ Latest", "btn secondary"),
      );
    }
    for (const c of [...list].sort((a, b) => b.iteration - a.iteration)) {
      const marks = [c.is_best ? el("span", { class: "mark best" }, "best") : null, c.is_latest ? el("span", { class: "mark latest" }, "latest") : null];
      ckptBody.appendChild(
        el(
          "tr",
          { "data-checkpoint": c.id },
          el("td", { class: "num" }, String(c.iteration)),
          el("td", { class: "num" }, fmtSteps(c.env_steps)),
          el("td", { class: "num" }, fmtNumber(c.episode_return_mean)),
          el("td", { class: "num" }, fmtBytes(c.size_bytes)),
          el("td", { title: fmtTime(c.created_at) }, fmtClock(c.created_at)),
          el("td", {}, marks),
          el("td", {}, downloadLink(c.id, "Download", "btn small")),
        ),
      );
    }
  }

  async function refreshCheckpoints(): Promise<void> {
    try {
      const list = await api.checkpoints(id);
      if (!closed) renderCheckpoints(list);
    } catch (e) {
      if (!closed) showNotice(e);
    }
  }

  // ---- log ------------------------------------------------------------------------------------
  const logLines: string[] = [];
  function appendLog(lines: string[], replace: boolean): void {
    if (replace) logLines.length = 0;
    logLines.push(...lines);
    if (logLines.length > MAX_LOG_LINES) logLines.splice(0, logLines.length - MAX_LOG_LINES);
    const atBottom = logPre.scrollTop + logPre.clientHeight >= logPre.scrollHeight - 4;
    logPre.textContent = logLines.join("\n");
    if (atBottom) logPre.scrollTop = logPre.scrollHeight;
  }

  // ---- wiring ---------------------------------------------------------------------------------
  const key = {};
  trackStream(key, null);
  const feed = new ExperimentFeed(id, allMetricNames(), {
    onMetrics: (names) => {
      for (const n of names) changed.add(n);
      flushCharts();
      scheduleRefresh();
    },
    onExperiment: (e) => applyExperiment(e),
    onStatus: () => void refreshExperiment(),
    onCheckpoint: () => void refreshCheckpoints(),
    onLog: (lines, replace) => appendLog(lines, replace),
    onState: (online) => trackStream(key, online),
  });

  void (async () => {
    try {
      const e = await api.get(id);
      if (closed) return;
      applyExperiment(e);
      await refreshCheckpoints();
      await feed.start();
    } catch (e) {
      if (!closed) showNotice(e);
    }
  })();

  return () => {
    closed = true;
    if (refreshTimer !== null) clearTimeout(refreshTimer);
    feed.close();
    untrackStream(key);
    for (const v of views) v.chart.destroy();
  };
}

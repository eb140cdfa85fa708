/**
 * Experiment page: live charts fed by the experiment's stream, status timeline, config, live log
 * tail, checkpoints with downloads, and the actions (stop, resume, fork, delete).
 */

import { api, ApiError } from "../../api/client";
import { ExperimentFeed } from "../../api/feed";
import type { Experiment, StopCriteria } from "../../api/types";
import { FINISHED } from "../../api/types";
import type { TrialOf } from "../../api/studyTypes";
import { trackStream, untrackStream } from "../../ui/conn";
import { clear, el, setText } from "../../ui/dom";
import { progressBar, updateProgress } from "../../ui/progress";
import { statusBadge, updateBadge } from "../../ui/status";
import { allMetricNames } from "../chartDefs";
import { renderActions, setResumable } from "./actions";
import { ChartsPanel } from "./charts";
import { CheckpointsPanel } from "./checkpoints";
import { EditPanel, renderNotes } from "./editor";
import { EvaluationsPanel } from "./evaluations";
import { Filmstrip } from "./filmstrip";
import { LogView } from "./logView";
import { metaLine, renderFailure, renderStats, renderTimeline } from "./sections";

/** Stats come from the experiment row; while metrics flow it is re-read at most this often. */
const REFRESH_MS = 2000;

export function mountDetail(root: HTMLElement, id: number): () => void {
  document.title = `Experiment ${id} · Rollout`;
  let exp: Experiment | null = null;
  let trial: TrialOf | null = null; // the study trial it runs, if any
  let trialRetries = 0;
  let closed = false;

  const title = el("h1", {}, `Experiment ${id}`);
  const badge = statusBadge("pending");
  badge.hidden = true; // until the experiment is known: a missing one has no status
  const meta = el("p", { class: "muted meta" });
  const actions = el("div", { class: "actions" });
  const bar = progressBar();
  const stats = el("dl", { class: "stats" });
  const notesBox = el("div", { class: "notes", "data-role": "notes", hidden: true });
  const failure = el("section", { class: "panel failure", hidden: true });
  const notice = el("p", { class: "error-box", hidden: true });
  const timeline = el("ol", { class: "timeline" });
  const configPre = el("pre", { class: "config" });
  const log = new LogView();

  function showNotice(e: unknown): void {
    notice.hidden = false;
    notice.textContent = e instanceof ApiError ? e.message : String(e);
    if (e instanceof ApiError && e.fields.length) {
      notice.append(el("ul", {}, e.fields.map((f) => el("li", {}, `${f.field}: ${f.message}`))));
    }
  }

  const editor = new EditPanel(id, (e) => applyExperiment(e), showNotice);
  const filmstrip = new Filmstrip((step) => charts.markStep(step), showNotice);
  const evaluations = new EvaluationsPanel(id, showNotice, (rows) => filmstrip.update(rows));
  const checkpoints = new CheckpointsPanel(id, showNotice, (c) => evaluations.openForm(c));
  const key = {};
  trackStream(key, null);
  const feed = new ExperimentFeed(id, allMetricNames(), {
    onMetrics: (names) => {
      charts.update(names);
      scheduleRefresh();
    },
    onExperiment: (e) => applyExperiment(e),
    onStatus: () => void refreshExperiment(),
    onCheckpoint: () => void refreshCheckpoints(),
    onLog: (lines, replace) => log.add(lines, replace),
    onState: (online) => {
      trackStream(key, online);
      if (online) evaluations.refresh().catch(showNotice); // catch up on what a drop missed
    },
    onEvaluation: (eid, e) => evaluations.onMessage(eid, e),
  });
  const charts = new ChartsPanel(feed, showNotice);

  root.appendChild(
    el(
      "div",
      { class: "detail" },
      el("section", { class: "panel" }, el("div", { class: "page-head" }, el("div", { class: "title-line" }, title, badge), actions), editor.root, meta, bar, stats, notesBox, notice),
      failure,
      filmstrip.root,
      charts.root,
      el("div", { class: "two-col" }, el("section", { class: "panel" }, el("h2", {}, "Status timeline"), timeline), checkpoints.root),
      evaluations.root,
      el("section", { class: "panel" }, el("h2", {}, "Log"), log.root),
      el("section", { class: "panel" }, el("details", {}, el("summary", {}, "Config"), configPre)),
    ),
  );

  async function act(fn: () => Promise<Experiment | undefined>): Promise<void> {
    try {
      notice.hidden = true;
      const res = await fn();
      if (res && res.id === id) applyExperiment(res);
    } catch (e) {
      showNotice(e);
    }
  }

  const handlers = {
    edit: () => exp && editor.toggle(exp),
    stop: () => void act(() => api.stop(id)),
    resume: (stop: StopCriteria) =>
      void act(async () => {
        location.hash = `#/experiments/${(await api.resume(id, stop)).id}`;
        return undefined;
      }),
    remove: () =>
      void act(async () => {
        await api.remove(id);
        location.hash = "#/";
        return undefined;
      }),
  };

  /** Finished without a metric (it failed at start-up, or was stopped while queued). */
  function markEmptyCharts(): void {
    if (exp && FINISHED.has(exp.status)) {
      const why = exp.status === "failed" ? "it failed before its first iteration" : `it was ${exp.status} before its first iteration`;
      charts.showEmpty(`No metrics were recorded: ${why}.`);
    }
  }

  function applyExperiment(e: Experiment): void {
    const previous = exp?.status;
    exp = { ...e, events: e.events ?? exp?.events, children: e.children ?? exp?.children };
    document.title = `${e.name} · Rollout`;
    setText(title, e.name);
    updateBadge(badge, e.status);
    badge.hidden = false;
    meta.replaceChildren(...metaLine(exp));
    if (e.sweep_id) {
      meta.append(" · ", el("a", { class: "sweep-link", href: `#/sweeps/${e.sweep_id}` }, `member of sweep ${e.sweep_id}`));
    }
    if (trial) {
      const link = el("a", { class: "study-link", href: `#/studies/${trial.study_id}` }, `trial #${trial.number} of study ${trial.study_name}`);
      if (trial.note) link.title = trial.note;
      meta.append(" · ", link, trial.state === "running" ? "" : ` (${trial.state})`);
    }
    updateProgress(bar, exp);
    renderStats(stats, exp);
    renderNotes(notesBox, exp);
    renderFailure(failure, exp);
    if (exp.events) renderTimeline(timeline, exp.events);
    if (previous !== e.status) renderActions(actions, exp, checkpoints.count > 0, handlers);
    if (!configPre.textContent) {
      configPre.textContent = JSON.stringify(e.config, null, 2);
      filmstrip.configure(e.evaluation_every, Number(e.config.checkpoint_every ?? 0));
      const envId = e.config.env_id;
      if (typeof envId === "string") charts.setEnv(envId).catch(showNotice);
    }
    if (previous === undefined || previous !== e.status) void refreshTrial();
    if (previous !== undefined && previous !== e.status) {
      void refreshCheckpoints();
      markEmptyCharts();
    }
  }

  /** The study trial it runs, if any: shown in the meta line, refreshed as its status moves
   * (a pruned run's trial says `pruned` once the study has settled it). */
  async function refreshTrial(): Promise<void> {
    try {
      const found = await api.trialOf(id);
      if (closed) return;
      // The study settles an ended run's trial on its next tick: ask once more shortly.
      const unsettled = found !== null && (found.state === "running" || found.state === "pruning");
      if (unsettled && exp && FINISHED.has(exp.status) && trialRetries++ < 5) {
        setTimeout(() => void refreshTrial(), 2000);
      }
      if (JSON.stringify(found) === JSON.stringify(trial)) return;
      trial = found;
      if (exp) applyExperiment(exp);
    } catch (e) {
      if (!closed) showNotice(e);
    }
  }

  async function refreshExperiment(): Promise<void> {
    try {
      const e = await api.get(id);
      if (!closed) applyExperiment(e);
    } catch (e) {
      if (!closed) showNotice(e);
    }
  }

  let refreshTimer: ReturnType<typeof setTimeout> | null = null;
  function scheduleRefresh(): void {
    if (refreshTimer !== null) return;
    refreshTimer = setTimeout(() => {
      refreshTimer = null;
      void refreshExperiment();
    }, REFRESH_MS);
  }

  async function refreshCheckpoints(): Promise<void> {
    try {
      const list = await api.checkpoints(id);
      if (closed) return;
      checkpoints.render(list);
      setResumable(actions, list.length > 0);
    } catch (e) {
      if (!closed) showNotice(e);
    }
  }

  /** No such experiment: one message, not a page of an experiment that is not there. */
  function showMissing(e: ApiError): void {
    feed.close();
    untrackStream(key);
    charts.destroy();
    clear(root);
    document.title = `Experiment ${id} not found · Rollout`;
    root.appendChild(el("section", { class: "panel", "data-role": "missing" }, el("h1", {}, `Experiment ${id}`), el("p", { class: "error-box" }, e.message), el("a", { href: "#/" }, "Back to experiments")));
  }

  void (async () => {
    try {
      const e = await api.get(id);
      if (closed) return;
      applyExperiment(e);
      await refreshCheckpoints();
      await feed.start();
      if (!closed) markEmptyCharts();
    } catch (e) {
      if (closed) return;
      if (e instanceof ApiError && e.status === 404 && exp === null) showMissing(e);
      else showNotice(e);
    }
  })();

  return () => {
    closed = true;
    if (refreshTimer !== null) clearTimeout(refreshTimer);
    feed.close();
    untrackStream(key);
    charts.destroy();
    evaluations.close();
    filmstrip.close();
  };
}

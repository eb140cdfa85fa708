/**
 * Study page: the search's settings, its trials (params, state, objective value or latest
 * intermediate value, env steps, experiment), the best value over trials, the parameters'
 * importances and parallel coordinates of the trials coloured by their value. Live by polling:
 * GET /studies/{id} every 2 s (one request in flight) while the study runs or stops; polling ends
 * when it has ended or the page is left. From the best trial: fork it (the experiment form with
 * its config, the trial's run as parent) or sweep it over seeds.
 */

import { api, ApiError } from "../api/client";
import type { ParamSpec, StudyDetail, Trial, TrialState } from "../api/studyTypes";
import type { Status } from "../api/types";
import { fmtSteps, fmtNumber } from "../data/format";
import { bestSoFar, describeSpec, shownValue, studyLive, trialProgress } from "../data/studyData";
import { clear, el, setText } from "../ui/dom";
import { ParallelCoords, type AxisDomain } from "../ui/parallelCoords";
import { statusBadge, updateBadge } from "../ui/status";
import { BestValueChart } from "../ui/studyChart";
import { fmtValue } from "../ui/sweepChart";

const REFRESH_MS = 2000;
const MIN_COMPLETE_FOR_IMPORTANCES = 4;

/** A trial state's badge: the colour and icon of the run status it resembles. */
const STATE_LOOK: Record<TrialState, Status> = {
  running: "running",
  pruning: "stopping",
  complete: "succeeded",
  pruned: "stopped",
  failed: "failed",
  stopped: "stopped",
};

export function fmtParam(v: unknown): string {
  if (typeof v === "number") return fmtValue(v);
  if (typeof v === "string") return v;
  return JSON.stringify(v);
}

function settingsText(s: StudyDetail): [string, string][] {
  const o = s.objective;
  const reduce = o.reduce === "last_k" ? `the mean of its last ${o.k} reports` : "its final report";
  const sampler = s.sampler.kind === "tpe" ? `TPE (${s.sampler.n_startup_trials} random suggestions first)` : "random";
  const p = s.pruner;
  const pruner =
    p.kind === "median"
      ? `median (after ${p.n_startup_trials} complete trials, ${p.n_warmup_intervals} warm-up intervals)`
      : p.kind === "asha"
        ? `ASHA (first rung after ${p.min_intervals} interval${p.min_intervals === 1 ? "" : "s"}, 1 in ${p.reduction_factor} goes up)`
        : "none (every trial runs its budget)";
  return [
    ["Objective", `${o.direction} ${o.metric}: ${reduce}`],
    ["Sampler", sampler],
    ["Pruner", `${pruner}; an intermediate value every ${s.interval_env_steps.toLocaleString("en-US")} env steps`],
    ["Trials", `${s.n_trials}, at most ${s.max_parallel} at once, seed ${s.seed}`],
    ["Space", Object.entries(s.space).map(([k, spec]) => `${k}: ${describeSpec(spec as ParamSpec, fmtValue)}`).join(" · ")],
  ];
}

export function mountStudy(root: HTMLElement, id: number): () => void {
  document.title = `Study ${id} · Rollout`;
  let closed = false;
  let study: StudyDetail | null = null;
  let chart: BestValueChart | null = null;
  let parallel: ParallelCoords | null = null;
  const rows = new Map<number, { sig: string; row: HTMLTableRowElement }>();

  const title = el("h1", {}, `Study ${id}`);
  const badge = statusBadge("running");
  const settings = el("dl", { class: "study-settings", "data-role": "settings" });
  const progress = el("p", { "data-role": "progress" });
  const bestLine = el("p", { "data-role": "best" });
  const notice = el("p", { class: "error-box", hidden: true });
  const stopBtn = el("button", { type: "button", class: "btn danger", "data-action": "stop-study", disabled: true }, "Stop study");
  const deleteBtn = el("button", { type: "button", class: "btn secondary", "data-action": "delete-study", hidden: true }, "Delete study");
  const forkLink = el("a", { class: "btn", href: `#/new?study=${id}`, "data-action": "fork-best", hidden: true, title: "A new experiment with the best trial's config, edited first" }, "Fork best trial");
  const seedLink = el("a", { class: "btn secondary", href: `#/sweeps?study=${id}`, "data-action": "seed-sweep-best", hidden: true, title: "A sweep of the best trial's config over seeds 0, 1, 2" }, "Seed sweep of best");
  const head = el("tr");
  const body = el("tbody");
  const chartBox = el("div", { class: "study-chart" });
  const importances = el("div", { class: "importances", "data-role": "importances" });
  const parallelBox = el("section", { class: "panel", "data-role": "parallel", hidden: true }, el("h2", {}, "Parameters → objective (a line per trial, coloured by its value)"));

  root.appendChild(
    el(
      "div",
      { class: "study" },
      el(
        "section",
        { class: "panel" },
        el("div", { class: "page-head" }, el("div", {}, title, " ", badge), el("div", { class: "toolbar" }, forkLink, seedLink, stopBtn, deleteBtn, el("a", { href: "#/studies" }, "All studies"))),
        settings,
        progress,
        bestLine,
        notice,
      ),
      el(
        "section",
        { class: "panel" },
        el("h2", {}, "Trials"),
        el("div", { class: "table-wrap" }, el("table", { class: "experiments trials" }, el("thead", {}, head), body)),
      ),
      el("section", { class: "panel study-results" }, chartBox, el("div", {}, el("h3", {}, "Parameter importances"), importances)),
      parallelBox,
    ),
  );

  function showError(e: unknown): void {
    notice.hidden = false;
    notice.textContent = e instanceof ApiError ? e.message : String(e);
  }

  function renderHeader(s: StudyDetail): void {
    setText(title, s.name);
    document.title = `${s.name} · Study · Rollout`;
    updateBadge(badge, s.status);
    if (!settings.childElementCount) {
      for (const [k, v] of settingsText(s)) settings.append(el("dt", {}, k), el("dd", { "data-setting": k.toLowerCase() }, v));
    }
    setText(progress, `Trials: ${trialProgress(s.counts, s.n_trials).text}`);
    const best = s.trials.find((t) => t.number === s.best_trial);
    setText(bestLine, s.best_value === null ? "Best value: none yet (no trial is complete)." : `Best value: ${fmtNumber(s.best_value)} (trial #${s.best_trial}${best?.experiment_id ? `, experiment #${best.experiment_id}` : ""})`);
    bestLine.dataset.best = s.best_value === null ? "" : String(s.best_value);
    const live = studyLive(s.status);
    stopBtn.disabled = s.status !== "running";
    deleteBtn.hidden = live;
    forkLink.hidden = seedLink.hidden = s.best_trial === null;
  }

  function trialRow(s: StudyDetail, t: Trial): HTMLTableRowElement {
    const shown = shownValue(t);
    const value =
      shown.kind === "final"
        ? fmtNumber(shown.value)
        : shown.kind === "latest"
          ? el("span", { class: "latest", title: `Latest intermediate value, at ${fmtSteps(shown.step)} env steps; not the trial's result` }, fmtNumber(shown.value), el("small", {}, ` latest @ ${fmtSteps(shown.step)}`))
          : "–";
    const state = el("td", {}, statusBadge(STATE_LOOK[t.state], t.state), t.note ? el("p", { class: "trial-note", "data-role": "note" }, t.note) : null);
    return el(
      "tr",
      { "data-number": t.number, "data-state": t.state, title: t.note ?? null, class: t.number === s.best_trial ? "best" : null },
      el("td", { class: "num" }, `#${t.number}`),
      state,
      Object.keys(s.space).map((k) => el("td", { class: "num", "data-param": k }, k in t.params ? fmtParam(t.params[k]) : "–")),
      el("td", { class: "num", "data-role": "value", "data-kind": shown.kind }, value),
      el("td", { class: "num" }, fmtSteps(t.env_steps)),
      el("td", {}, t.experiment_id === null ? "deleted" : el("a", { href: `#/experiments/${t.experiment_id}`, "data-role": "experiment-link" }, `#${t.experiment_id}`)),
    );
  }

  function renderTrials(s: StudyDetail): void {
    if (!head.childElementCount) {
      head.append(...["#", "State", ...Object.keys(s.space), `Value (${s.objective.metric})`, "Env steps", "Experiment"].map((h) => el("th", {}, h)));
    }
    for (const t of s.trials) {
      const sig = JSON.stringify([t, t.number === s.best_trial]);
      const known = rows.get(t.number);
      if (known?.sig === sig) continue;
      const row = trialRow(s, t);
      if (known) known.row.replaceWith(row);
      else body.appendChild(row);
      rows.set(t.number, { sig, row });
    }
  }

  function renderImportances(s: StudyDetail): void {
    const entries = Object.entries(s.importances).sort((a, b) => b[1] - a[1]);
    const sig = JSON.stringify(entries);
    if (importances.dataset.sig === sig && importances.childElementCount) return;
    importances.dataset.sig = sig;
    clear(importances);
    if (!entries.length) {
      const complete = s.counts.complete ?? 0;
      importances.append(el("p", { class: "muted" }, `Shown once at least ${MIN_COMPLETE_FOR_IMPORTANCES} trials are complete (${complete} so far).`));
      return;
    }
    const top = Math.max(...entries.map(([, v]) => v), 1e-12);
    for (const [k, v] of entries) {
      importances.append(
        el(
          "div",
          { class: "imp-row", "data-param": k, "data-share": v },
          el("span", { class: "imp-label" }, k),
          el("span", { class: "imp-bar" }, el("span", { class: "imp-fill", style: `width:${((100 * v) / top).toFixed(1)}%` })),
          el("span", { class: "imp-value num" }, `${(100 * v).toFixed(0)} %`),
        ),
      );
    }
  }

  function renderResults(s: StudyDetail): void {
    chart ??= new BestValueChart(chartBox, s.objective.metric);
    const cols = bestSoFar(s.trials, s.objective.direction);
    chart.setData(cols.x, cols.value, cols.best);
    renderImportances(s);
    const keys = Object.keys(s.space);
    const withParams = s.trials.filter((t) => Object.keys(t.params).length);
    parallelBox.hidden = withParams.length === 0;
    if (withParams.length) {
      parallel ??= new ParallelCoords(parallelBox);
      const categories: Record<string, readonly unknown[]> = {};
      const domains: Record<string, AxisDomain> = {};
      for (const [k, spec] of Object.entries(s.space)) {
        if (spec.type === "categorical") categories[k] = spec.choices;
        else domains[k] = { low: spec.low, high: spec.high, log: spec.log };
      }
      const lines = withParams.map((t) => ({
        id: t.number,
        point: t.params,
        value: t.state === "complete" ? t.value : null,
        title: `trial #${t.number} (${t.state}): ${t.value === null ? "no value" : fmtNumber(t.value)}`,
      }));
      parallel.draw(lines, keys, { valueLabel: s.objective.metric, idAttr: "trial", categories, domains, lowerIsBetter: s.objective.direction === "minimize" });
    }
  }

  function render(s: StudyDetail): void {
    study = s;
    renderHeader(s);
    renderTrials(s);
    renderResults(s);
  }

  // --- polling: one request in flight, the next REFRESH_MS after it, while the study is live ---
  let timer: ReturnType<typeof setTimeout> | null = null;
  let inFlight = false;
  async function refresh(): Promise<void> {
    timer = null;
    inFlight = true;
    try {
      const got = await api.study(id);
      if (closed) return;
      notice.hidden = true;
      render(got);
    } catch (e) {
      if (closed) return;
      showError(e);
      if (e instanceof ApiError && e.status === 404) study = null;
    } finally {
      inFlight = false;
      schedule();
    }
  }
  function schedule(): void {
    if (closed || timer || inFlight || !study || !studyLive(study.status)) return;
    timer = setTimeout(() => void refresh(), REFRESH_MS);
  }

  stopBtn.addEventListener("click", async () => {
    stopBtn.disabled = true;
    try {
      render(await api.stopStudy(id));
      schedule();
    } catch (e) {
      showError(e);
      stopBtn.disabled = false;
    }
  });
  deleteBtn.addEventListener("click", async () => {
    if (!confirm(`Delete study ${id}, its ${study?.trials.length ?? 0} trials and their experiments?`)) return;
    try {
      await api.deleteStudy(id);
      location.hash = "#/studies";
    } catch (e) {
      showError(e);
    }
  });

  void refresh();

  return () => {
    closed = true;
    if (timer) clearTimeout(timer);
    chart?.destroy();
  };
}

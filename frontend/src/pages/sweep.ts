/**
 * Sweep page: one band + mean line per seed group (the server aggregates over seeds on a common
 * env-steps grid), groups ranked by final mean return, final return against each grid key, and
 * the members. Live: the list websocket carries every member's status and progress; a member's
 * change refreshes the group metrics (at most one request in flight, one every 2 s). The service
 * announces progress at most once a second per member and never sends a skipped announcement
 * later, so while a member is active (and for a while after the last message) the page keeps
 * refreshing: the last metrics of a run are never left out of the ranking.
 */

import { api, ApiError, wsUrl } from "../api/client";
import { LiveStream } from "../api/stream";
import type { GroupSeries, SweepDetail, SweepMetrics } from "../api/sweepTypes";
import { FINISHED, type Experiment, type StreamMessage } from "../api/types";
import { fmtNumber, fmtSteps } from "../data/format";
import { bandColumns, ranking, scatter, type BandMode } from "../data/sweepData";
import { trackStream, untrackStream } from "../ui/conn";
import { clear, el, frameScheduler, setText } from "../ui/dom";
import { statusBadge, updateBadge } from "../ui/status";
import { ParallelCoords } from "../ui/parallelCoords";
import { groupColor, ScatterChart, SweepChart } from "../ui/sweepChart";

const METRIC = "episode_return_mean";
const GRID_POINTS = 200;
const REFRESH_MS = 2000;

export function mountSweep(root: HTMLElement, id: number): () => void {
  document.title = `Sweep ${id} · Rollout`;
  let closed = false;
  let sweep: SweepDetail | null = null;
  let metrics: SweepMetrics | null = null;
  let mode: BandMode = "ci";
  const members = new Map<number, Experiment>();
  let chart: SweepChart | null = null;
  const scatters = new Map<string, ScatterChart>();

  const title = el("h1", {}, `Sweep ${id}`);
  const badge = statusBadge("queued");
  const summary = el("p", { class: "muted", "data-role": "summary" });
  const notice = el("p", { class: "error-box", hidden: true });
  const stopBtn = el("button", { type: "button", class: "btn danger", "data-action": "stop-sweep" }, "Stop sweep");
  const deleteBtn = el("button", { type: "button", class: "btn secondary", "data-action": "delete-sweep", hidden: true }, "Delete sweep");
  const modeSel = el(
    "select",
    { name: "band", "aria-label": "Band" },
    el("option", { value: "ci" }, "95 % bootstrap interval of the mean"),
    el("option", { value: "minmax" }, "min – max over seeds"),
  );
  const chartBox = el("div", { class: "charts" });
  const nNote = el("p", { class: "muted", "data-role": "n-note" });
  const rankBody = el("tbody");
  const scatterBox = el("div", { class: "charts" });
  const parallelBox = el("section", { class: "panel", "data-role": "parallel", hidden: true }, el("h2", {}, "Grid → final return (a line per group, coloured by its final mean return)"));
  let parallel: ParallelCoords | null = null;
  const memberBody = el("tbody");

  root.appendChild(
    el(
      "div",
      { class: "sweep" },
      el(
        "section",
        { class: "panel" },
        el("div", { class: "page-head" }, el("div", {}, title, " ", badge), el("div", { class: "toolbar" }, stopBtn, deleteBtn, el("a", { href: "#/sweeps" }, "All sweeps"))),
        summary,
        notice,
      ),
      el("section", { class: "panel" }, el("div", { class: "page-head" }, el("h2", {}, "Episode return by group"), modeSel), chartBox, nNote),
      el(
        "section",
        { class: "panel" },
        el("h2", {}, "Groups ranked by final mean return"),
        el(
          "div",
          { class: "table-wrap" },
          el("table", { class: "experiments ranking" }, el("thead", {}, el("tr", {}, ["#", "Group", "Final mean", "Min", "Max", "Seeds reporting"].map((h) => el("th", {}, h)))), rankBody),
        ),
      ),
      el("section", { class: "panel", "data-role": "scatters" }, el("h2", {}, "Hyperparameters → final return"), scatterBox),
      parallelBox,
      el(
        "section",
        { class: "panel" },
        el("h2", {}, "Members"),
        el(
          "div",
          { class: "table-wrap" },
          el("table", { class: "experiments members" }, el("thead", {}, el("tr", {}, ["Experiment", "Group", "Seed", "Status", "Env steps", "Return"].map((h) => el("th", {}, h)))), memberBody),
        ),
      ),
    ),
  );

  function showError(e: unknown): void {
    notice.hidden = false;
    notice.textContent = e instanceof ApiError ? e.message : String(e);
  }

  function groupLabel(index: number | null | undefined): string {
    const g = sweep?.groups.find((x) => x.index === index);
    return g ? g.label || "all seeds" : "–";
  }

  function renderHeader(): void {
    if (!sweep) return;
    const all = [...members.values()];
    const counts = new Map<string, number>();
    for (const m of all) counts.set(m.status, (counts.get(m.status) ?? 0) + 1);
    const status = all.some((m) => m.status === "running") ? "running" : all.some((m) => m.status === "stopping") ? "stopping" : all.some((m) => m.status === "pending" || m.status === "queued") ? "queued" : counts.get("stopped") ? "stopped" : counts.get("failed") ? "failed" : "succeeded";
    updateBadge(badge, status);
    const keys = Object.entries(sweep.grid).map(([k, v]) => `${k} (${v.length})`);
    const countText = [...counts.entries()].map(([s, n]) => `${n} ${s}`).join(", ");
    setText(summary, `${all.length} members · grid: ${keys.join(" × ") || "none (seeds only)"} · seeds ${sweep.seeds.join(", ")} · at most ${sweep.max_parallel} at once · ${countText}`);
    const done = all.every((m) => FINISHED.has(m.status));
    stopBtn.disabled = done;
    deleteBtn.hidden = !done;
  }

  function renderMembers(): void {
    clear(memberBody);
    for (const m of [...members.values()].sort((a, b) => a.id - b.id)) {
      memberBody.appendChild(
        el(
          "tr",
          { "data-id": m.id, "data-status": m.status },
          el("td", {}, el("a", { href: `#/experiments/${m.id}` }, `#${m.id} ${m.name}`)),
          el("td", {}, groupLabel(m.sweep_group)),
          el("td", { class: "num" }, String(m.config?.seed ?? "–")),
          el("td", {}, statusBadge(m.status)),
          el("td", { class: "num" }, fmtSteps(m.env_steps)),
          el("td", { class: "num" }, fmtNumber(m.episode_return_mean)),
        ),
      );
    }
  }

  function renderRanking(groups: GroupSeries[]): void {
    clear(rankBody);
    for (const { rank, group } of ranking(groups)) {
      const swatch = el("span", { class: "swatch", style: `background:${groupColor(group.index)}` });
      rankBody.appendChild(
        el(
          "tr",
          { "data-group": group.index },
          el("td", { class: "num" }, String(rank)),
          el("td", {}, swatch, " ", group.label || "all seeds"),
          el("td", { class: "num" }, fmtNumber(group.final.mean)),
          el("td", { class: "num" }, fmtNumber(group.final.min)),
          el("td", { class: "num" }, fmtNumber(group.final.max)),
          el("td", { class: "num" }, `${group.final.n} / ${group.member_ids.length}`),
        ),
      );
    }
  }

  function renderMetrics(): void {
    const m = metrics?.metrics[METRIC];
    if (!m || !sweep) return;
    if (!chart) chart = new SweepChart(chartBox, "Episode return (mean over seeds)", m.groups);
    chart.setData(bandColumns(m, mode));
    const lastN = m.groups.map((g) => `${g.label || "all seeds"}: ${g.n.length ? g.n[g.n.length - 1] : 0}/${g.member_ids.length}`);
    setText(nNote, m.step.length ? `Only members that have reached a step count there (members at the last step — ${lastN.join("; ")}). Interval: ${metrics?.bootstrap_resamples} bootstrap resamples, seed ${metrics?.bootstrap_seed}.` : "No member has reported a return yet.");
    renderRanking(m.groups);
    for (const key of metrics?.grid_keys ?? []) {
      let s = scatters.get(key);
      if (!s) {
        s = new ScatterChart(scatterBox, key);
        scatters.set(key, s);
      }
      s.setData(scatter(m.groups, key));
    }
    if (!metrics?.grid_keys.length) setText(scatterBox, "This sweep varies only the seed.");
    const keys = metrics?.grid_keys ?? [];
    parallelBox.hidden = keys.length < 2;
    if (keys.length >= 2) {
      parallel ??= new ParallelCoords(parallelBox);
      parallel.render(m.groups, keys);
    }
  }

  // --- metric refreshes: one in flight, at most one every REFRESH_MS --------------------------
  let inFlight = false;
  let wanted = false;
  let lastFetch = 0;
  let timer: ReturnType<typeof setTimeout> | null = null;
  /** Refresh at least until then: messages may have left metrics unannounced. */
  let settleUntil = 0;
  function live(): boolean {
    return Date.now() < settleUntil || [...members.values()].some((m) => !FINISHED.has(m.status));
  }
  async function fetchMetrics(): Promise<void> {
    inFlight = true;
    wanted = false;
    lastFetch = Date.now();
    try {
      const got = await api.sweepMetrics(id, [METRIC], GRID_POINTS);
      if (closed) return;
      metrics = got;
      renderMetrics();
    } catch (e) {
      if (!closed) showError(e);
    } finally {
      inFlight = false;
      if ((wanted || live()) && !closed) scheduleMetrics();
    }
  }
  function scheduleMetrics(): void {
    wanted = true;
    if (inFlight || timer) return;
    const wait = Math.max(0, lastFetch + REFRESH_MS - Date.now());
    timer = setTimeout(() => {
      timer = null;
      void fetchMetrics();
    }, wait);
  }

  modeSel.addEventListener("change", () => {
    mode = modeSel.value as BandMode;
    renderMetrics();
  });
  stopBtn.addEventListener("click", async () => {
    stopBtn.disabled = true;
    try {
      const got = await api.stopSweep(id);
      for (const m of got.members) members.set(m.id, m);
      renderHeader();
      renderMembers();
    } catch (e) {
      showError(e);
      stopBtn.disabled = false;
    }
  });
  deleteBtn.addEventListener("click", async () => {
    if (!confirm(`Delete sweep ${id} and its ${members.size} experiments?`)) return;
    try {
      await api.deleteSweep(id);
      location.hash = "#/sweeps";
    } catch (e) {
      showError(e);
    }
  });

  // Every member's ingest sends a summary: redraw the header and table once per frame.
  const renderLive = frameScheduler(() => {
    renderHeader();
    renderMembers();
  });
  const key = {};
  const stream = new LiveStream({
    url: () => wsUrl("/stream"),
    onMessage: (msg: StreamMessage) => {
      if (msg.type !== "experiment" || msg.experiment.sweep_id !== id) return;
      members.set(msg.experiment.id, msg.experiment);
      settleUntil = Date.now() + 2 * REFRESH_MS;
      renderLive();
      scheduleMetrics();
    },
    onState: (online) => {
      trackStream(key, online);
      if (online) scheduleMetrics();
    },
  });
  trackStream(key, null);

  void (async () => {
    try {
      sweep = await api.sweep(id);
    } catch (e) {
      showError(e);
      return;
    }
    if (closed) return;
    document.title = `${sweep.name} · Sweep · Rollout`;
    setText(title, sweep.name);
    for (const m of sweep.members) members.set(m.id, m);
    renderHeader();
    renderMembers();
    await fetchMetrics();
    if (!closed) stream.start();
  })();

  return () => {
    closed = true;
    if (timer) clearTimeout(timer);
    stream.close();
    untrackStream(key);
    chart?.destroy();
    for (const s of scatters.values()) s.destroy();
  };
}

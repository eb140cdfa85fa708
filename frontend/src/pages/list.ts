/**
 * Experiments page: filterable table, updated in place from the list websocket (rows are patched,
 * never re-rendered wholesale; updates are coalesced to one per frame), select rows to compare.
 */

import { api, ApiError, wsUrl } from "../api/client";
import { LiveStream } from "../api/stream";
import { FINISHED, STATUSES, type Experiment, type StreamMessage } from "../api/types";
import { matches } from "../data/filter";
import { columnLabel, columnSortKey, compareRuns, configPaths, isColumn, METRIC_AGGS, summaryNames, viewFromQuery, viewToHash, type ListView, type SortKey, type Summaries } from "../data/sortRuns";
import { trackStream, untrackStream } from "../ui/conn";
import { watchOverflow } from "../ui/overflow";
import { clear, el, frameScheduler } from "../ui/dom";
import { COLUMNS, ExperimentRow } from "../ui/experimentRow";

const PAGE = 50;
// Metric columns of running experiments are refreshed this often (their series grow).
const SUMMARY_REFRESH_MS = 5000;

export function mountList(root: HTMLElement, query: URLSearchParams): () => void {
  document.title = "Experiments · Rollout";
  const filter: ListView = viewFromQuery(query);
  const rows = new Map<number, ExperimentRow>();
  const selected = new Set<number>();
  const dirty = new Set<number>();
  let cursor: string | null = null;
  let loadSeq = 0;

  const statusSel = el("select", { name: "status", "aria-label": "Filter by status" }, el("option", { value: "" }, "any status"), STATUSES.map((s) => el("option", { value: s }, s)));
  const tagInput = el("input", { name: "tag", type: "search", placeholder: "tag contains…", "aria-label": "Filter by tag", value: filter.tag });
  const nameInput = el("input", { name: "name", type: "search", placeholder: "name contains…", "aria-label": "Filter by name", value: filter.name });
  statusSel.value = filter.status;
  let headers: HTMLElement[] = [];
  const headRow = el("tr", {});
  const colInput = el("input", { name: "add-column", list: "config-paths", placeholder: "config field, e.g. lr", "aria-label": "Add a column: a config field or a metric" });
  const colKind = el(
    "select",
    { name: "column-kind", "aria-label": "What the column shows" },
    el("option", { value: "config" }, "config field"),
    METRIC_AGGS.map((agg) => el("option", { value: agg }, `metric: ${agg}`)),
  );
  const colOptions = el("datalist", { id: "config-paths" });
  const metricOptions = el("datalist", { id: "metric-names" });
  const addCol = el("button", { type: "button", class: "btn secondary small", "data-action": "add-column", title: "Show this config field or metric as a column" }, "+ column");
  const summaries: Summaries = new Map();
  let summarySeq = 0;
  colKind.addEventListener("change", () => {
    const metric = colKind.value !== "config";
    colInput.setAttribute("list", metric ? "metric-names" : "config-paths");
    colInput.placeholder = metric ? "metric, e.g. vf_loss" : "config field, e.g. lr";
  });

  function renderHeader(): void {
    const sortable = (label: string, key: SortKey, extra?: HTMLElement) => {
      const button = el("button", { type: "button", class: "sort", "data-sort": key, title: `Sort by ${label}`, onclick: () => sortBy(key) }, label);
      return el("th", { "data-sort-key": key }, button, extra);
    };
    headers = [
      ...COLUMNS.map(([label, key]) => (key ? sortable(label, key) : el("th", {}, label))),
      ...filter.cols.map((col) =>
        sortable(columnLabel(col), columnSortKey(col), el("button", { type: "button", class: "remove-col", title: `Remove the ${columnLabel(col)} column`, "data-remove-column": col, onclick: () => setColumns(filter.cols.filter((c) => c !== col)) }, "✕")),
      ),
    ];
    headRow.replaceChildren(...headers);
    showSort();
  }

  function setColumns(cols: string[]): void {
    filter.cols = cols;
    if ((filter.sort.startsWith("config.") || filter.sort.startsWith("metric.")) && !cols.some((c) => columnSortKey(c) === filter.sort)) [filter.sort, filter.dir] = ["id", "desc"];
    renderHeader();
    for (const [id, old] of rows) {
      const fresh = new ExperimentRow(old.exp, selected.has(id), onSelect, filter.cols, summaries);
      old.tr.replaceWith(fresh.tr);
      rows.set(id, fresh);
    }
    reorder();
    keepInUrl();
    void refreshSummaries();
  }

  /** Fetch the metric columns' summaries of the rows shown (one request), then patch them. */
  async function refreshSummaries(): Promise<void> {
    const names = summaryNames(filter.cols);
    if (!names.length || !rows.size) return;
    const seq = ++summarySeq;
    try {
      const ids = [...rows.keys()].slice(0, 200);
      const got = (await api.metricSummaries(ids, names)).summaries;
      if (seq !== summarySeq) return;
      summaries.clear();
      for (const [id, byName] of Object.entries(got)) summaries.set(Number(id), byName);
      for (const id of rows.keys()) dirty.add(id);
      flush();
      if (filter.sort.startsWith("metric.")) reorderSoon();
    } catch (e) {
      errorBox.hidden = false;
      errorBox.textContent = e instanceof ApiError ? e.message : String(e);
    }
  }

  addCol.addEventListener("click", () => {
    const name = colInput.value.trim();
    const col = colKind.value === "config" ? name.replace(/^config\./, "") : `${colKind.value}:${name}`;
    if (!isColumn(col) || filter.cols.includes(col)) return;
    colInput.value = "";
    setColumns([...filter.cols, col]);
  });
  colInput.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter") addCol.click();
  });
  const compareBtn = el("button", { type: "button", class: "btn", disabled: true, "data-action": "compare" }, "Compare selected");
  const tbody = el("tbody");
  const empty = el("p", { class: "muted empty" });
  const more = el("button", { type: "button", class: "btn secondary", hidden: true }, "Load more");
  const errorBox = el("p", { class: "error-box", hidden: true });
  const tableWrap = el(
    "div",
    { class: "table-wrap list-wrap" },
    el("table", { class: "experiments" }, el("thead", {}, headRow), tbody),
  );
  const unwatch = watchOverflow(tableWrap);

  root.appendChild(
    el(
      "section",
      { class: "panel" },
      el("div", { class: "page-head" }, el("h1", {}, "Experiments"), el("a", { class: "btn", href: "#/new" }, "+ New experiment")),
      el("div", { class: "toolbar" }, statusSel, tagInput, nameInput, compareBtn, el("span", { class: "add-column" }, colKind, colInput, colOptions, metricOptions, addCol)),
      errorBox,
      tableWrap,
      empty,
      more,
    ),
  );

  /** Header marks and the rows' order follow `filter.sort`; the URL keeps the view. */
  function showSort(): void {
    for (const th of headers) {
      const key = th.dataset.sortKey;
      if (!key) continue;
      const on = key === filter.sort;
      th.setAttribute("aria-sort", on ? (filter.dir === "asc" ? "ascending" : "descending") : "none");
      th.classList.toggle("sorted", on);
    }
  }

  function sortBy(key: SortKey): void {
    filter.dir = filter.sort === key && filter.dir === "desc" ? "asc" : "desc";
    filter.sort = key;
    showSort();
    reorder();
    keepInUrl();
  }

  function reorder(): void {
    const order = [...rows.values()].map((r) => r.exp).sort(compareRuns(filter.sort, filter.dir, Date.now(), summaries));
    const current = [...tbody.children] as HTMLElement[];
    if (order.every((e, i) => Number(current[i]?.dataset.id) === e.id)) return;
    for (const e of order) tbody.appendChild((rows.get(e.id) as ExperimentRow).tr);
  }
  const reorderSoon = frameScheduler(reorder);

  /** Replace (not push) the hash: filters typed in are not each a history entry. */
  function keepInUrl(): void {
    const hash = viewToHash(filter);
    if (location.hash !== hash && !(hash === "#/" && (location.hash === "" || location.hash === "#/" || location.hash === "#"))) {
      history.replaceState(null, "", hash);
    }
  }

  function updateCompare(): void {
    compareBtn.disabled = selected.size < 2;
    compareBtn.textContent = selected.size ? `Compare selected (${selected.size})` : "Compare selected";
  }

  function onSelect(id: number, on: boolean): void {
    if (on) selected.add(id);
    else selected.delete(id);
    updateCompare();
  }

  function showEmpty(): void {
    empty.textContent = rows.size ? "" : filter.status || filter.tag || filter.name ? "No experiment matches the filter." : "No experiments yet: start one with “New experiment”.";
  }

  const flush = frameScheduler(() => {
    const now = Date.now();
    for (const id of dirty) {
      const r = rows.get(id);
      if (r) r.render(now);
    }
    dirty.clear();
  });

  function upsert(exp: Experiment): void {
    const row = rows.get(exp.id);
    if (row) {
      if (!matches(exp, filter)) {
        row.tr.remove();
        rows.delete(exp.id);
        showEmpty();
        return;
      }
      row.exp = exp;
      dirty.add(exp.id);
      flush();
      if (filter.sort !== "id") reorderSoon();
    } else if (matches(exp, filter)) {
      const r = new ExperimentRow(exp, selected.has(exp.id), onSelect, filter.cols, summaries);
      if (colOptions.childElementCount === 0) {
        colOptions.append(...configPaths(exp.config).sort().map((p) => el("option", { value: p })));
      }
      if (metricOptions.childElementCount === 0 && exp.env_steps !== null) {
        metricOptions.append(el("option", { value: "episode_return_mean" })); // until the names come
        api
          .metricNames(exp.id)
          .then(({ names }) => metricOptions.replaceChildren(...names.map((n) => el("option", { value: n }))))
          .catch(() => undefined); // the picker still takes typed names
      }
      rows.set(exp.id, r);
      // Newest first: a new experiment has the highest id.
      const after = [...tbody.children].find((tr) => Number((tr as HTMLElement).dataset.id) < exp.id);
      tbody.insertBefore(r.tr, after ?? null);
      if (filter.sort !== "id" || filter.dir !== "desc") reorderSoon();
      showEmpty();
    }
  }

  async function load(reset: boolean): Promise<void> {
    const seq = ++loadSeq;
    try {
      const page = await api.list({ status: filter.status, tag_contains: filter.tag, name: filter.name, limit: PAGE, cursor: reset ? null : cursor });
      if (seq !== loadSeq) return;
      errorBox.hidden = true;
      if (reset) {
        clear(tbody);
        rows.clear();
      }
      for (const exp of page.items) upsert(exp);
      void refreshSummaries();
      cursor = page.next_cursor;
      more.hidden = !cursor;
      showEmpty();
    } catch (e) {
      if (seq !== loadSeq) return;
      errorBox.hidden = false;
      errorBox.textContent = e instanceof ApiError ? e.message : String(e);
    }
  }

  let debounce: ReturnType<typeof setTimeout> | null = null;
  const onFilter = () => {
    filter.status = statusSel.value;
    filter.tag = tagInput.value.trim();
    filter.name = nameInput.value.trim();
    keepInUrl();
    if (debounce) clearTimeout(debounce);
    debounce = setTimeout(() => void load(true), 200);
  };
  statusSel.addEventListener("change", onFilter);
  tagInput.addEventListener("input", onFilter);
  nameInput.addEventListener("input", onFilter);
  more.addEventListener("click", () => void load(false));
  compareBtn.addEventListener("click", () => {
    location.hash = `#/compare?ids=${[...selected].sort((a, b) => a - b).join(",")}`;
  });

  const key = {};
  let everOnline = false;
  const stream = new LiveStream({
    url: () => wsUrl("/stream"),
    onMessage: (m: StreamMessage) => {
      if (m.type === "experiment") upsert(m.experiment);
      else if (m.type === "deleted") {
        rows.get(m.experiment_id)?.tr.remove();
        rows.delete(m.experiment_id);
        selected.delete(m.experiment_id);
        updateCompare();
        showEmpty();
      }
    },
    onState: (online) => {
      trackStream(key, online);
      // After a drop, updates may have been missed: reload the visible page once.
      if (online && everOnline) void load(true);
      everOnline ||= online;
    },
  });
  trackStream(key, null);
  renderHeader();
  void load(true).then(() => stream.start());

  // Durations and ETAs of running experiments move with the clock.
  const tick = setInterval(() => {
    for (const [id, r] of rows) if (!FINISHED.has(r.exp.status) && r.exp.started_at) dirty.add(id);
    if (dirty.size) flush();
  }, 1000);
  // Metric columns follow running experiments' growing series.
  const summaryTick = setInterval(() => {
    if ([...rows.values()].some((r) => !FINISHED.has(r.exp.status))) void refreshSummaries();
  }, SUMMARY_REFRESH_MS);

  return () => {
    unwatch();
    clearInterval(tick);
    clearInterval(summaryTick);
    if (debounce) clearTimeout(debounce);
    stream.close();
    untrackStream(key);
  };
}

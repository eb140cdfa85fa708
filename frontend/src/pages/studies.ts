/** Studies page: every hyperparameter study with its status, trials per state and best value,
 * newest first, and the new-study form. */

import { api, ApiError } from "../api/client";
import { fmtNumber, fmtTime } from "../data/format";
import { trialProgress } from "../data/studyData";
import { el } from "../ui/dom";
import { statusBadge } from "../ui/status";
import { studyForm } from "./studyForm";

export function mountStudies(root: HTMLElement, query: URLSearchParams): () => void {
  document.title = "Studies · Rollout";
  const tbody = el("tbody");
  const empty = el("p", { class: "muted empty" });
  const errorBox = el("p", { class: "error-box", hidden: true });
  root.appendChild(
    el(
      "section",
      { class: "panel" },
      el("div", { class: "page-head" }, el("h1", {}, "Studies"), el("div", { class: "toolbar" }, el("a", { href: "#/sweeps" }, "Sweeps"), el("a", { href: "#/" }, "Experiments"))),
      el("p", { class: "muted" }, "A study searches hyperparameters with Optuna: each trial is an experiment, suggested from the results so far and pruned when it falls behind. Create one here or with POST /api/v1/studies."),
      studyForm(query.get("new") !== null),
      errorBox,
      el("div", { class: "table-wrap" }, el("table", { class: "experiments studies" }, el("thead", {}, el("tr", {}, ["Name", "Status", "Trials", "Objective", "Best value", "Created"].map((h) => el("th", {}, h)))), tbody)),
      empty,
    ),
  );
  let closed = false;
  void api
    .studies()
    .then(({ items }) => {
      if (closed) return;
      empty.textContent = items.length ? "" : "No studies yet.";
      for (const s of items) {
        tbody.appendChild(
          el(
            "tr",
            { "data-id": s.id },
            el("td", { class: "name" }, el("a", { href: `#/studies/${s.id}` }, s.name)),
            el("td", {}, statusBadge(s.status)),
            el("td", { "data-role": "trials" }, trialProgress(s.counts, s.n_trials).text),
            el("td", {}, `${s.objective.direction} ${s.objective.metric}`),
            el("td", { class: "num", "data-role": "best" }, s.best_value === null ? "–" : `${fmtNumber(s.best_value)} (#${s.best_trial})`),
            el("td", {}, fmtTime(s.created_at)),
          ),
        );
      }
    })
    .catch((e) => {
      errorBox.hidden = false;
      errorBox.textContent = e instanceof ApiError ? e.message : String(e);
    });
  return () => {
    closed = true;
  };
}

/** Sweeps page: every sweep with its status and members per status, newest first. */

import { api, ApiError } from "../api/client";
import { fmtTime } from "../data/format";
import { el } from "../ui/dom";
import { statusBadge } from "../ui/status";
import { loadBestTrial } from "./bestTrial";
import { sweepForm } from "./sweepForm";

export function mountSweeps(root: HTMLElement, query: URLSearchParams): () => void {
  document.title = "Sweeps · Rollout";
  const tbody = el("tbody");
  const formBox = el("div", {});
  const empty = el("p", { class: "muted empty" });
  const errorBox = el("p", { class: "error-box", hidden: true });
  root.appendChild(
    el(
      "section",
      { class: "panel" },
      el("div", { class: "page-head" }, el("h1", {}, "Sweeps"), el("div", { class: "toolbar" }, el("a", { href: "#/studies" }, "Studies (hyperparameter search)"), el("a", { href: "#/" }, "Experiments"))),
      el("p", { class: "muted" }, "A sweep runs one experiment per grid point and seed: create one here, with `rollout sweep submit sweep.yaml` or POST /api/v1/sweeps."),
      formBox,
      errorBox,
      el("div", { class: "table-wrap" }, el("table", { class: "experiments sweeps" }, el("thead", {}, el("tr", {}, ["Name", "Status", "Members", "Grid", "Seeds", "Created"].map((h) => el("th", {}, h)))), tbody)),
      empty,
    ),
  );
  let closed = false;
  const showError = (e: unknown) => {
    errorBox.hidden = false;
    errorBox.textContent = e instanceof ApiError ? e.message : String(e);
  };
  // ?from=ID: the form opens with that experiment's config as the base.
  const from = Number(query.get("from"));
  if (Number.isInteger(from) && from > 0) {
    void api
      .get(from)
      .then((e) => closed || formBox.appendChild(sweepForm(e.config, e.name)))
      .catch((e) => {
        showError(e);
        formBox.appendChild(sweepForm(null, null));
      });
  } else if (/^\d+$/.test(query.get("study") ?? "")) {
    // ?study=ID: a seed sweep of that study's best trial (its config without its seed: 0, 1, 2).
    void loadBestTrial(Number(query.get("study")))
      .then((src) => {
        if (closed) return;
        const { seed: _seed, ...config } = src.config;
        formBox.appendChild(sweepForm(config, src.name));
      })
      .catch((e) => {
        showError(e);
        formBox.appendChild(sweepForm(null, null));
      });
  } else {
    formBox.appendChild(sweepForm(null, null));
  }
  void api
    .sweeps()
    .then(({ items }) => {
      if (closed) return;
      empty.textContent = items.length ? "" : "No sweeps yet.";
      for (const s of items) {
        const counts = Object.entries(s.counts).map(([k, n]) => `${n} ${k}`).join(", ");
        tbody.appendChild(
          el(
            "tr",
            { "data-id": s.id },
            el("td", { class: "name" }, el("a", { href: `#/sweeps/${s.id}` }, s.name)),
            el("td", {}, statusBadge(s.status)),
            el("td", {}, `${s.size} (${counts})`),
            el("td", {}, Object.entries(s.grid).map(([k, v]) => `${k}: ${v.length}`).join(" × ") || "–"),
            el("td", {}, s.seeds.join(", ")),
            el("td", {}, fmtTime(s.created_at)),
          ),
        );
      }
    })
    .catch(showError);
  return () => {
    closed = true;
  };
}

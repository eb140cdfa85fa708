/** Sweeps page: every sweep with its status and members per status, newest first. */

import { api, ApiError } from "../api/client";
import { fmtTime } from "../data/format";
import { el } from "../ui/dom";
import { statusBadge } from "../ui/status";

export function mountSweeps(root: HTMLElement): () => void {
  document.title = "Sweeps · Rollout";
  const tbody = el("tbody");
  const empty = el("p", { class: "muted empty" });
  const errorBox = el("p", { class: "error-box", hidden: true });
  root.appendChild(
    el(
      "section",
      { class: "panel" },
      el("div", { class: "page-head" }, el("h1", {}, "Sweeps"), el("a", { href: "#/" }, "Experiments")),
      el("p", { class: "muted" }, "A sweep runs one experiment per grid point and seed: submit one with POST /api/v1/sweeps or `rollout sweep submit sweep.yaml`."),
      errorBox,
      el("div", { class: "table-wrap" }, el("table", { class: "experiments sweeps" }, el("thead", {}, el("tr", {}, ["Name", "Status", "Members", "Grid", "Seeds", "Created"].map((h) => el("th", {}, h)))), tbody)),
      empty,
    ),
  );
  let closed = false;
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
    .catch((e) => {
      errorBox.hidden = false;
      errorBox.textContent = e instanceof ApiError ? e.message : String(e);
    });
  return () => {
    closed = true;
  };
}

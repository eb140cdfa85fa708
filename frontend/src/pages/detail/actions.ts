/** The experiment's buttons: Stop while it runs; Resume, Delete once finished; Fork and Sweep
 * (a sweep with this config as its base) and Edit (name, tags, notes) always.
 *
 * Resume opens a small form with the run's stop criteria, so a run that met its budget can
 * train longer (env steps count on from the checkpoint; seconds are the new run's). */

import type { Experiment, StopCriteria } from "../../api/types";
import { FINISHED } from "../../api/types";
import { fmtSteps } from "../../data/format";
import { clear, el } from "../../ui/dom";

export interface ActionHandlers {
  edit: () => void;
  stop: () => void;
  resume: (stop: StopCriteria) => void;
  remove: () => void;
}

const STOP_FIELDS: [keyof StopCriteria, string, string][] = [
  ["env_steps", "Env steps in all", "1"],
  ["episode_return_mean", "Mean return", "any"],
  ["wall_seconds", "Seconds of the new run", "any"],
];

export function renderActions(box: HTMLElement, e: Experiment, canResume: boolean, on: ActionHandlers): void {
  clear(box);
  if (!FINISHED.has(e.status)) {
    const stopping = e.status === "stopping";
    box.appendChild(el("button", { type: "button", class: "btn danger", "data-action": "stop", disabled: stopping, onclick: on.stop }, stopping ? "Stopping…" : "Stop"));
  } else {
    const form = resumeForm(e, on);
    box.append(
      el(
        "button",
        {
          type: "button",
          class: "btn secondary",
          "data-action": "resume",
          hidden: !canResume,
          title: "A new experiment that continues from the latest checkpoint",
          onclick: () => {
            form.hidden = !form.hidden;
            if (!form.hidden) form.querySelector("input")?.focus();
          },
        },
        "Resume…",
      ),
      el(
        "button",
        {
          type: "button",
          class: "btn secondary",
          "data-action": "delete",
          onclick: () => {
            if (confirm(`Delete experiment “${e.name}” with its metrics and checkpoints?`)) on.remove();
          },
        },
        "Delete",
      ),
    );
    box.append(...copies(e, on), form);
    return;
  }
  box.append(...copies(e, on));
}

function copies(e: Experiment, on: ActionHandlers): HTMLElement[] {
  return [
    el("button", { type: "button", class: "btn secondary", "data-action": "edit", title: "Rename, retag, write notes", onclick: on.edit }, "Edit"),
    el("a", { class: "btn secondary", href: `#/new?from=${e.id}`, title: "A new experiment with this config, edited first" }, "Fork"),
    el("a", { class: "btn secondary", href: `#/sweeps?from=${e.id}`, "data-action": "sweep-from", title: "A grid x seeds sweep with this config as its base" }, "Sweep…"),
  ];
}

/** The stop criteria of the resumed run, prefilled with this run's; an empty field clears one. */
function resumeForm(e: Experiment, on: ActionHandlers): HTMLFormElement {
  const stop: StopCriteria = e.config?.stop ?? {};
  const inputs = STOP_FIELDS.map(([key, label, step]) =>
    el(
      "label",
      {},
      `${label} `,
      el("input", { type: "number", name: `stop.${key}`, step, min: key === "episode_return_mean" ? undefined : "0", value: stop[key] ?? "", placeholder: "none" }),
    ),
  );
  const form = el(
    "form",
    { class: "resume-form", "data-role": "resume-form", hidden: true },
    el("p", { class: "muted" }, `Stop the resumed run when any of these is met. This run reached ${fmtSteps(e.env_steps)} env steps; raise the budget to train longer.`),
    el("div", { class: "resume-fields" }, ...inputs),
    el("div", { class: "actions" }, el("button", { type: "submit", class: "btn", "data-action": "resume-submit" }, "Resume"), el("button", { type: "button", class: "btn secondary", onclick: () => (form.hidden = true) }, "Cancel")),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const criteria: StopCriteria = {};
    for (const [key] of STOP_FIELDS) {
      const raw = (form.elements.namedItem(`stop.${key}`) as HTMLInputElement).value.trim();
      criteria[key] = raw === "" ? null : Number(raw);
    }
    on.resume(criteria);
  });
  return form;
}

/** Show or hide Resume once the checkpoint count is known. */
export function setResumable(box: HTMLElement, canResume: boolean): void {
  const resume = box.querySelector<HTMLElement>("[data-action=resume]");
  if (resume) resume.hidden = !canResume;
}

/** The experiment's buttons: Stop while it runs; Resume, Delete once finished; Fork always. */

import type { Experiment } from "../../api/types";
import { FINISHED } from "../../api/types";
import { clear, el } from "../../ui/dom";

export interface ActionHandlers {
  stop: () => void;
  resume: () => void;
  remove: () => void;
}

export function renderActions(box: HTMLElement, e: Experiment, canResume: boolean, on: ActionHandlers): void {
  clear(box);
  if (!FINISHED.has(e.status)) {
    const stopping = e.status === "stopping";
    box.appendChild(el("button", { type: "button", class: "btn danger", "data-action": "stop", disabled: stopping, onclick: on.stop }, stopping ? "Stopping…" : "Stop"));
  } else {
    box.append(
      el("button", { type: "button", class: "btn secondary", "data-action": "resume", hidden: !canResume, title: "A new experiment that continues from the latest checkpoint", onclick: on.resume }, "Resume"),
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
  }
  box.appendChild(el("a", { class: "btn secondary", href: `#/new?from=${e.id}`, title: "A new experiment with this config, edited first" }, "Fork"));
}

/** Show or hide Resume once the checkpoint count is known. */
export function setResumable(box: HTMLElement, canResume: boolean): void {
  const resume = box.querySelector<HTMLElement>("[data-action=resume]");
  if (resume) resume.hidden = !canResume;
}

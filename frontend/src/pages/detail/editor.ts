/** Rename, retag and annotate an experiment (PATCH /experiments/{id}); its notes, rendered. */

import { api } from "../../api/client";
import type { Experiment } from "../../api/types";
import { renderMarkdown } from "../../data/markdown";
import { el } from "../../ui/dom";

/** The notes under the experiment's stats, rendered from markdown (hidden without notes). */
export function renderNotes(box: HTMLElement, e: Experiment): void {
  const text = e.notes ?? "";
  if (box.dataset.source === text) return;
  box.dataset.source = text;
  box.hidden = !text;
  box.replaceChildren(renderMarkdown(text));
}

export class EditPanel {
  readonly root: HTMLFormElement;
  private readonly name = el("input", { name: "edit.name", required: true, maxlength: 200 });
  private readonly tags = el("input", { name: "edit.tags", placeholder: "comma, separated" });
  private readonly notes = el("textarea", { name: "edit.notes", rows: 6, placeholder: "What this run tries, what it showed (markdown: **bold**, *italic*, `code`, - lists, # headings, [links](https://...))" });

  constructor(
    private readonly id: number,
    private readonly onSaved: (e: Experiment) => void,
    private readonly onError: (e: unknown) => void,
  ) {
    this.root = el(
      "form",
      { class: "edit-form", "data-role": "edit-form", hidden: true },
      el("label", {}, "Name ", this.name),
      el("label", {}, "Tags ", this.tags),
      el("label", { class: "wide" }, "Notes ", this.notes),
      el("div", { class: "actions wide" }, el("button", { type: "submit", class: "btn", "data-action": "save-edit" }, "Save"), el("button", { type: "button", class: "btn secondary", onclick: () => (this.root.hidden = true) }, "Cancel")),
    );
    this.root.addEventListener("submit", (ev) => {
      ev.preventDefault();
      void this.save();
    });
  }

  toggle(e: Experiment): void {
    this.root.hidden = !this.root.hidden;
    if (this.root.hidden) return;
    this.name.value = e.name;
    this.tags.value = e.tags.join(", ");
    this.notes.value = e.notes ?? "";
    this.name.focus();
  }

  private async save(): Promise<void> {
    const tags = this.tags.value.split(",").map((t) => t.trim()).filter(Boolean);
    try {
      const saved = await api.update(this.id, { name: this.name.value.trim(), tags, notes: this.notes.value.trim() || null });
      this.root.hidden = true;
      this.onSaved(saved);
    } catch (e) {
      this.onError(e);
    }
  }
}

/**
 * The new-sweep form on the sweeps page: a base config (JSON or YAML, as the experiment form
 * loads it), grid rows (a field, dotted for nested ones, and its values), seeds and the number
 * of members running at once. What it sends is what `rollout sweep submit` sends:
 * POST /api/v1/sweeps {name, config, grid, seeds, max_parallel}.
 */

import { api, ApiError } from "../api/client";
import type { SweepCreate } from "../api/sweepTypes";
import { parseConfigText } from "../form/configFile";
import { parseValues } from "../form/values";
import { clear, el } from "../ui/dom";

export const DEFAULT_BASE = "env_id: CartPole-v1\nstop:\n  env_steps: 50000\n";

export { parseValues };

/** "0, 1, 2" or "0-4" (inclusive) -> seeds. */
export function parseSeeds(text: string): number[] {
  const range = /^\s*(\d+)\s*-\s*(\d+)\s*$/.exec(text);
  if (range) {
    const [lo, hi] = [Number(range[1]), Number(range[2])];
    return Array.from({ length: Math.max(0, hi - lo + 1) }, (_, i) => lo + i);
  }
  return text
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => {
      if (!/^\d+$/.test(s)) throw new Error(`seed ${JSON.stringify(s)} is not a whole number`);
      return Number(s);
    });
}

export function sweepForm(baseConfig: Record<string, unknown> | null, baseName: string | null): HTMLElement {
  const nameInput = el("input", { name: "sweep.name", required: true, maxlength: 200, value: baseName ? `${baseName} sweep` : "", placeholder: "cartpole lr" });
  const baseArea = el("textarea", { name: "sweep.config", rows: 8, spellcheck: "false" });
  // A sweep sets its members' seeds itself (`seeds`): an experiment's seed leaves the base
  // config and becomes the first of three seeds, so the untouched form creates the sweep.
  const { seed, ...base } = baseConfig ?? {};
  const first = typeof seed === "number" && Number.isInteger(seed) && seed >= 0 ? seed : 0;
  baseArea.value = baseConfig ? JSON.stringify(base, null, 2) : DEFAULT_BASE;
  const rows = el("div", { class: "grid-rows", "data-role": "grid-rows" });
  const seedsInput = el("input", { name: "sweep.seeds", value: `${first}, ${first + 1}, ${first + 2}`, title: "0, 1, 2 or 0-4" });
  const parallelInput = el("input", { name: "sweep.max_parallel", type: "number", min: 1, value: 2 });
  const everyInput = el("input", { name: "sweep.evaluation_every", type: "number", min: 0, value: 0, title: "A video of every N-th checkpoint of each member as it trains (0: none)" });
  const errorBox = el("div", { class: "error-box", "data-role": "sweep-error", hidden: true });
  const submit = el("button", { type: "submit", class: "btn", "data-action": "create-sweep" }, "Create sweep");

  function addRow(key = "", values = ""): void {
    const row = el(
      "div",
      { class: "grid-row" },
      el("input", { name: "grid.key", placeholder: "lr or stop.env_steps", value: key }),
      el("input", { name: "grid.values", placeholder: "0.001, 0.0003", value: values }),
      el("button", { type: "button", class: "btn small secondary", title: "Remove this row", onclick: () => row.remove() }, "✕"),
    );
    rows.appendChild(row);
  }
  addRow("lr", "0.001, 0.0003");

  function fail(message: string, fields: { field: string; message: string }[] = []): void {
    errorBox.hidden = false;
    clear(errorBox);
    errorBox.append(message);
    if (fields.length) errorBox.append(el("ul", {}, fields.map((f) => el("li", { "data-error-for": f.field }, `${f.field}: ${f.message}`))));
  }

  async function read(): Promise<SweepCreate> {
    const doc = await parseConfigText(baseArea.value);
    const grid: Record<string, unknown[]> = {};
    for (const row of rows.querySelectorAll(".grid-row")) {
      const key = (row.querySelector('[name="grid.key"]') as HTMLInputElement).value.trim();
      const raw = (row.querySelector('[name="grid.values"]') as HTMLInputElement).value;
      if (!key && !raw.trim()) continue;
      if (!key) throw new Error(`grid values ${JSON.stringify(raw)} have no field`);
      try {
        grid[key] = parseValues(raw);
      } catch (e) {
        throw new Error(`grid ${key}: ${(e as Error).message}`);
      }
    }
    return {
      name: nameInput.value.trim(),
      config: doc.config,
      grid,
      seeds: parseSeeds(seedsInput.value),
      max_parallel: Number(parallelInput.value),
      evaluation_every: Number(everyInput.value || 0),
    };
  }

  const form = el(
    "form",
    { class: "sweep-form", "data-role": "sweep-form" },
    el("label", {}, "Name ", nameInput),
    el("label", { class: "wide" }, "Base config (JSON or YAML; every member starts from it)", baseArea),
    el("div", { class: "wide" }, el("span", {}, "Grid: every combination of these values is one group"), rows, el("button", { type: "button", class: "btn small secondary", "data-action": "add-grid-row", onclick: () => addRow() }, "+ field")),
    el("label", {}, "Seeds ", seedsInput),
    el("label", {}, "Running at once ", parallelInput),
    el("label", {}, "Videos every N checkpoints ", everyInput),
    errorBox,
    el("div", { class: "actions wide" }, submit),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    errorBox.hidden = true;
    submit.disabled = true;
    void (async () => {
      try {
        const created = await api.createSweep(await read());
        location.hash = `#/sweeps/${created.id}`;
      } catch (e) {
        if (e instanceof ApiError) fail(e.message, e.fields);
        else fail((e as Error).message);
      } finally {
        submit.disabled = false;
      }
    })();
  });
  return el("details", { class: "new-sweep", open: baseConfig !== null }, el("summary", {}, "New sweep"), form);
}

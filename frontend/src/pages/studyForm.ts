/**
 * The new-study form on the studies page: a base config (JSON or YAML, as the sweep form reads
 * it), a search space built row by row (a PPOConfig field from its schema, and a float / int range
 * or a list of choices), the trial budget, the objective, the sampler and the pruner. It sends
 * POST /api/v1/studies; the API's 422 field errors are shown at the field they name
 * (`space.lr.low` at that row's low bound), and a created study opens its page.
 */

import { api, ApiError } from "../api/client";
import type { ParamSpec, StudyCreate } from "../api/studyTypes";
import { placeStudyErrors, rangeTypes, readSpec, STUDY_METRICS, type RangeType, type SpaceRowText } from "../data/studyData";
import { parseConfigText } from "../form/configFile";
import { fieldSpecs, formatValue, GROUP_ORDER, type FieldSpec } from "../form/fields";
import { clear, el } from "../ui/dom";
import { DEFAULT_BASE } from "./sweepForm";

const SPECS = new Map(fieldSpecs().map((s) => [s.path, s] as const));
const ROW_PARTS = ["key", "type", "low", "high", "step", "choices"] as const;
type RowPart = (typeof ROW_PARTS)[number];

/** A <select> of every PPOConfig field, grouped as the experiment form groups them. */
function fieldSelect(): HTMLSelectElement {
  const groups = new Map<string, FieldSpec[]>();
  for (const s of SPECS.values()) groups.set(s.group, [...(groups.get(s.group) ?? []), s]);
  const ordered = [...groups].sort((a, b) => GROUP_ORDER.indexOf(a[0]) - GROUP_ORDER.indexOf(b[0]));
  return el(
    "select",
    { name: "space.key", "aria-label": "Config field" },
    el("option", { value: "" }, "— field —"),
    ordered.map(([group, specs]) => {
      const og = el("optgroup", {});
      og.label = group;
      og.append(...specs.map((s) => el("option", { value: s.path, title: s.description }, s.path)));
      return og;
    }),
  );
}

function choicesHint(spec: FieldSpec | undefined): string {
  if (!spec) return "a, b or a JSON list";
  if (spec.kind === "boolean") return "true, false";
  if (spec.kind === "enum") return spec.options.join(", ");
  if (spec.kind === "intlist") return "[[64, 64], [128, 128]]";
  if (spec.kind === "json") return '[{"k": 1}, {"k": 2}]';
  return `e.g. ${formatValue(spec, spec.defaultValue) || "a"}, … or a JSON list`;
}

interface SpaceRow {
  root: HTMLElement;
  key: HTMLSelectElement;
  type: HTMLSelectElement;
  low: HTMLInputElement;
  high: HTMLInputElement;
  log: HTMLInputElement;
  step: HTMLInputElement;
  choices: HTMLInputElement;
  errors: Record<RowPart, HTMLElement>;
  text(): SpaceRowText;
}

function spaceRow(onRemove: (row: SpaceRow) => void): SpaceRow {
  const errorSlot = () => el("p", { class: "field-error" });
  const errors: Record<RowPart, HTMLElement> = { key: errorSlot(), type: errorSlot(), low: errorSlot(), high: errorSlot(), step: errorSlot(), choices: errorSlot() };
  const key = fieldSelect();
  const type = el("select", { name: "space.type", "aria-label": "Range type" });
  const low = el("input", { name: "space.low", placeholder: "low", inputmode: "decimal", autocomplete: "off" });
  const high = el("input", { name: "space.high", placeholder: "high", inputmode: "decimal", autocomplete: "off" });
  const log = el("input", { type: "checkbox", name: "space.log" });
  const step = el("input", { name: "space.step", placeholder: "step (optional)", inputmode: "decimal", autocomplete: "off" });
  const choices = el("input", { name: "space.choices", placeholder: "choices", autocomplete: "off" });
  const part = (cls: string, input: HTMLElement, error: HTMLElement | null, label?: string) =>
    el("label", { class: `space-part ${cls}` }, label ? el("span", { class: "muted" }, label) : null, input, error);
  const rangeParts = [part("low", low, errors.low, "low"), part("high", high, errors.high, "high"), el("label", { class: "space-part log check" }, log, " log"), part("step", step, errors.step, "step")];
  const choiceParts = [part("choices", choices, errors.choices, "choices (comma-separated or a JSON list)")];
  const remove = el("button", { type: "button", class: "btn small secondary", title: "Remove this parameter" }, "✕");
  const root = el("div", { class: "space-row", "data-role": "space-row" }, part("key", key, errors.key, "field"), part("type", type, errors.type, "range"), rangeParts, choiceParts, remove);
  const row: SpaceRow = {
    root,
    key,
    type,
    low,
    high,
    log,
    step,
    choices,
    errors,
    text: () => ({ key: key.value, type: type.value as RangeType, low: low.value, high: high.value, log: log.checked, step: step.value, choices: choices.value }),
  };
  const showType = () => {
    const categorical = type.value === "categorical";
    for (const p of rangeParts) p.hidden = categorical;
    for (const p of choiceParts) p.hidden = !categorical;
  };
  const fieldChanged = () => {
    const spec = SPECS.get(key.value);
    // A new field starts with its natural range: float for a float, int for an integer.
    const allowed = rangeTypes(spec);
    type.replaceChildren(...allowed.map((t) => el("option", { value: t }, t)));
    type.value = allowed[0];
    const def = spec ? formatValue(spec, spec.defaultValue) : "";
    low.placeholder = high.placeholder = def ? `default ${def}` : "";
    choices.placeholder = choicesHint(spec);
    root.dataset.key = key.value;
    for (const p of ROW_PARTS) errors[p].dataset.errorFor = p === "key" ? `space.${key.value}` : `space.${key.value}.${p}`;
    showType();
  };
  key.addEventListener("change", fieldChanged);
  type.addEventListener("change", showType);
  remove.addEventListener("click", () => onRemove(row));
  fieldChanged();
  return row;
}

function numberInput(name: string, value: number | string, attrs: Record<string, string | number> = {}): HTMLInputElement {
  return el("input", { name, type: "number", value, ...attrs });
}

function choice(name: string, options: readonly string[], value: string): HTMLSelectElement {
  const select = el("select", { name }, options.map((o) => el("option", { value: o }, o)));
  select.value = value;
  return select;
}

export function studyForm(open: boolean): HTMLElement {
  const slots = new Map<string, HTMLElement>();
  const slot = (place: string) => {
    const p = el("p", { class: "field-error", "data-error-for": place });
    slots.set(place, p);
    return p;
  };
  const nameInput = el("input", { name: "study.name", required: true, maxlength: 200, placeholder: "cartpole lr search" });
  const baseArea = el("textarea", { name: "study.config", rows: 6, spellcheck: "false" });
  baseArea.value = DEFAULT_BASE;
  const nTrials = numberInput("study.n_trials", 20, { min: 1 });
  const maxParallel = numberInput("study.max_parallel", 2, { min: 1 });
  const seed = numberInput("study.seed", 0, { min: 0 });
  const metric = choice("objective.metric", STUDY_METRICS, "episode_return_mean");
  const direction = choice("objective.direction", ["maximize", "minimize"], "maximize");
  const reduce = choice("objective.reduce", ["last_k", "final"], "last_k");
  const k = numberInput("objective.k", 5, { min: 1 });
  const sampler = choice("sampler.kind", ["tpe", "random"], "tpe");
  const pruner = choice("pruner.kind", ["median", "percentile", "asha", "none"], "median");
  const interval = numberInput("pruner.interval_env_steps", "", { min: 1, placeholder: "a tenth of the budget" });
  const errorBox = el("div", { class: "error-box wide", "data-role": "study-error", hidden: true });
  const submit = el("button", { type: "submit", class: "btn", "data-action": "create-study" }, "Create study");

  const rowsBox = el("div", { class: "space-rows", "data-role": "space-rows" });
  const rows: SpaceRow[] = [];
  function addRow(): SpaceRow {
    const row = spaceRow((r) => {
      rows.splice(rows.indexOf(r), 1);
      r.root.remove();
    });
    rows.push(row);
    rowsBox.appendChild(row.root);
    return row;
  }
  const first = addRow();
  first.key.value = "lr";
  first.key.dispatchEvent(new Event("change"));
  first.low.value = "1e-4";
  first.high.value = "1e-2";
  first.log.checked = true;

  const labelled = (text: string, input: HTMLElement, place: string, extra: Record<string, string> = {}) => el("label", extra, text, input, slot(place));
  const kLabel = labelled("k (reports averaged)", k, "objective.k");
  const syncK = () => (kLabel.hidden = reduce.value !== "last_k");
  reduce.addEventListener("change", syncK);
  syncK();

  function clearErrors(): void {
    errorBox.hidden = true;
    clear(errorBox);
    for (const s of slots.values()) s.textContent = "";
    for (const r of rows) for (const p of ROW_PARTS) r.errors[p].textContent = "";
    for (const node of form.querySelectorAll(".invalid")) node.classList.remove("invalid");
  }

  /** Messages per place; places of the space rows are `space.<key>[.<part>]`. */
  function show(byPlace: Map<string, string[]>, general: string[]): void {
    const rowSlots = new Map<string, HTMLElement>();
    for (const r of rows) for (const p of ROW_PARTS) if (r.errors[p].dataset.errorFor) rowSlots.set(r.errors[p].dataset.errorFor as string, r.errors[p]);
    let first: HTMLElement | null = null;
    for (const [place, messages] of byPlace) {
      const target = slots.get(place) ?? rowSlots.get(place);
      if (!target) {
        general.push(...messages.map((m) => `${place}: ${m}`));
        continue;
      }
      target.textContent = messages.join("; ");
      target.parentElement?.classList.add("invalid");
      first ??= target;
    }
    const n = byPlace.size;
    if (general.length || n) {
      errorBox.hidden = false;
      errorBox.append(el("strong", {}, "The study was not created: "), general.length ? "" : `${n} field${n > 1 ? "s need" : " needs"} fixing (marked above).`);
      if (general.length) errorBox.append(el("ul", {}, general.map((g) => el("li", {}, g))));
    }
    (first ?? errorBox).scrollIntoView({ block: "center" });
  }

  function has(place: string): boolean {
    if (slots.has(place)) return true;
    return rows.some((r) => ROW_PARTS.some((p) => r.errors[p].dataset.errorFor === place));
  }

  /** The request, or the problems found before sending it (per place). */
  async function read(): Promise<StudyCreate | Map<string, string[]>> {
    const problems = new Map<string, string[]>();
    const put = (place: string, message: string) => problems.set(place, [...(problems.get(place) ?? []), message]);
    let config = {};
    try {
      config = (await parseConfigText(baseArea.value)).config;
    } catch (e) {
      put("config", (e as Error).message);
    }
    const space: Record<string, ParamSpec> = {};
    for (const r of rows) {
      const t = r.text();
      if (!t.key) {
        if ([t.low, t.high, t.step, t.choices].some((v) => v.trim())) put("space", "a row has values but no field: choose one or remove the row");
        continue;
      }
      if (t.key in space) {
        put(`space.${t.key}`, "already in the space (one row per field)");
        continue;
      }
      const got = readSpec(t);
      if (got.ok) space[t.key] = got.spec;
      else put(got.part === "key" ? `space.${t.key}` : `space.${t.key}.${got.part}`, got.message);
    }
    const int = (input: HTMLInputElement, place: string, optional = false): number | undefined => {
      const v = input.value.trim();
      if (!v && optional) return undefined;
      const n = Number(v);
      if (!v || !Number.isInteger(n)) put(place, "a whole number is required");
      return n;
    };
    const body: StudyCreate = {
      name: nameInput.value.trim(),
      config,
      space,
      n_trials: int(nTrials, "n_trials") as number,
      max_parallel: int(maxParallel, "max_parallel") as number,
      seed: int(seed, "seed") as number,
      objective: {
        metric: metric.value,
        direction: direction.value as StudyCreate["objective"]["direction"],
        reduce: reduce.value as StudyCreate["objective"]["reduce"],
        k: reduce.value === "last_k" ? (int(k, "objective.k") as number) : 5,
      },
      sampler: { kind: sampler.value as StudyCreate["sampler"]["kind"] },
      pruner: { kind: pruner.value as StudyCreate["pruner"]["kind"] },
    };
    const every = int(interval, "pruner.interval_env_steps", true);
    if (every !== undefined) body.pruner.interval_env_steps = every;
    return problems.size ? problems : body;
  }

  const form = el(
    "form",
    { class: "sweep-form study-form", "data-role": "study-form", novalidate: true },
    labelled("Name", nameInput, "name"),
    labelled("Trials", nTrials, "n_trials"),
    labelled("Running at once", maxParallel, "max_parallel"),
    el("label", { class: "wide" }, "Base config (JSON or YAML; every trial starts from it and needs stop.env_steps)", baseArea, slot("config")),
    el(
      "div",
      { class: "wide" },
      el("span", {}, "Search space: a range or a list of choices per config field"),
      rowsBox,
      slot("space"),
      el("button", { type: "button", class: "btn small secondary", "data-action": "add-space-row", onclick: () => void addRow() }, "+ parameter"),
    ),
    labelled("Objective metric", metric, "objective.metric"),
    labelled("Direction", direction, "objective.direction"),
    labelled("Reduce", reduce, "objective.reduce"),
    kLabel,
    labelled("Sampler", sampler, "sampler.kind"),
    labelled("Pruner", pruner, "pruner.kind"),
    labelled("Pruner interval (env steps)", interval, "pruner.interval_env_steps"),
    labelled("Seed", seed, "seed"),
    errorBox,
    el("div", { class: "actions wide" }, submit),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    clearErrors();
    submit.disabled = true;
    void (async () => {
      try {
        const body = await read();
        if (body instanceof Map) {
          show(body, []);
          return;
        }
        const created = await api.createStudy(body);
        location.hash = `#/studies/${created.id}`;
      } catch (e) {
        if (e instanceof ApiError && e.fields.length) {
          const placed = placeStudyErrors(e.fields, rows.map((r) => r.key.value).filter(Boolean), has);
          show(placed.byField, placed.general);
        } else show(new Map(), [e instanceof Error ? e.message : String(e)]);
      } finally {
        submit.disabled = false;
      }
    })();
  });
  return el("details", { class: "new-study", open }, el("summary", {}, "New study"), form);
}

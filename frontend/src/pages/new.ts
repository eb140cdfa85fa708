/**
 * New-experiment form, built from PPOConfig's schema: defaults filled in, every field explained,
 * rarely changed fields under "Advanced", a JSON / YAML file can be pasted or uploaded. The
 * API's 422 errors are shown next to their field. Submitting opens the new experiment.
 *
 * Presets: the env id (or the preset chosen) decides the settings of every field the user has
 * not touched. The form asks the API what the config resolves to, shows those values, names the
 * preset and marks the fields it set (data-from-preset). Typing into a field makes it the
 * user's; submitting sends only the user's fields, so the server's resolution is what is stored.
 */

import { api, ApiError } from "../api/client";
import type { PPOConfig, ResolvedConfig } from "../api/types";
import { flatten } from "../data/configDiff";
import { deepMerge, parseConfigText } from "../form/configFile";
import { placeFieldErrors } from "../form/errors";
import { fieldView, readInput, setFieldError, writeInput, type FieldView } from "../form/fieldInput";
import {
  chosenConfig,
  DEFAULTS,
  ENV_IDS,
  fieldSpecs,
  getPath,
  GROUP_ORDER,
  parseValue,
  PRESET_INPUTS,
  presetSets,
  setPath,
} from "../form/fields";
import { deletePath, suggestField } from "../form/unknownKeys";
import { clear, el } from "../ui/dom";
import { loadBestTrial } from "./bestTrial";

function defaultName(envId: string): string {
  const d = new Date();
  const pad = (n: number) => String(n).padStart(2, "0");
  const stamp = `${pad(d.getMonth() + 1)}${pad(d.getDate())}-${pad(d.getHours())}${pad(d.getMinutes())}${pad(d.getSeconds())}`;
  return `${envId.toLowerCase().replace(/[^a-z0-9]+/g, "-")}-${stamp}`;
}

/** Fieldsets per group, in GROUP_ORDER; rarely changed fields go to the "Advanced" list. */
function layoutFields(views: FieldView[]): { basic: HTMLElement[]; advanced: HTMLElement[] } {
  const groups = new Map<string, { basic: HTMLElement; advanced: HTMLElement }>();
  for (const v of views) {
    let g = groups.get(v.spec.group);
    if (!g) groups.set(v.spec.group, (g = { basic: el("div", { class: "fields" }), advanced: el("div", { class: "fields" }) }));
    (v.spec.advanced ? g.advanced : g.basic).appendChild(v.wrap);
  }
  const basic: HTMLElement[] = [];
  const advanced: HTMLElement[] = [];
  for (const [name, g] of [...groups].sort((a, b) => GROUP_ORDER.indexOf(a[0]) - GROUP_ORDER.indexOf(b[0]))) {
    if (g.basic.children.length) basic.push(el("fieldset", {}, el("legend", {}, name), g.basic));
    if (g.advanced.children.length) advanced.push(el("fieldset", {}, el("legend", {}, name), g.advanced));
  }
  return { basic, advanced };
}

function plainField(name: string, input: HTMLElement, help: string, error: HTMLElement): HTMLElement {
  return el("div", { class: "field", "data-field": name }, el("label", { for: input.id }, name), input, el("p", { class: "help" }, help), error);
}

/** The inputs a budget's real end depends on (whole iterations of the total batch). */
const BUDGET_INPUTS = new Set(["stop.env_steps", "train_batch_size_per_learner", "num_learners"]);

export function mountNew(root: HTMLElement, query: URLSearchParams): () => void {
  document.title = "New experiment · Rollout";
  let closed = false;
  const views = new Map(fieldSpecs().map((spec) => [spec.path, fieldView(spec)] as const));
  /** Keys from a loaded file that the form has no input for: sent as-is so the API can judge. */
  let extras: Record<string, unknown> = {};
  /** Paths the user typed into or loaded from a file / a forked experiment. */
  const touched = new Set<string>();
  const presetNote = el("p", { class: "preset-note muted", "data-preset": "", "aria-live": "polite" });

  const nameInput = el("input", { name: "name", id: "f-name", required: true, autocomplete: "off" });
  const nameError = el("p", { class: "field-error", "data-error-for": "name" });
  const tagsInput = el("input", { name: "tags", id: "f-tags", placeholder: "baseline, cartpole", autocomplete: "off" });
  const tagsError = el("p", { class: "field-error", "data-error-for": "tags" });
  // Watch it learn is the run's setting, not its config's (the API takes it beside `config`).
  const everyInput = el("input", { name: "evaluation_every", id: "f-evaluation_every", type: "number", min: 0, max: 100000, step: 1, value: "0", inputmode: "numeric" });
  const everyError = el("p", { class: "field-error", "data-error-for": "evaluation_every" });
  const formError = el("div", { class: "error-box", hidden: true, role: "alert" });
  const unknownBox = el("div", { class: "error-box unknown-keys", hidden: true, "data-role": "unknown-keys" });
  const submit = el("button", { type: "submit", class: "btn" }, "Create and start");
  const fileInput = el("input", { type: "file", accept: ".json,.yaml,.yml,application/json,text/yaml", "aria-label": "Upload a JSON or YAML config" });
  const pasteArea = el("textarea", { rows: 6, name: "paste", placeholder: "Paste a JSON or YAML config (or {name, tags, config}) and press Apply" });
  const applyBtn = el("button", { type: "button", class: "btn secondary", "data-action": "apply-paste" }, "Apply");
  const fileMsg = el("p", { class: "muted", "aria-live": "polite" });
  const sections = layoutFields([...views.values()]);
  const advanced = el("details", { class: "advanced" }, el("summary", {}, "Advanced"), sections.advanced);

  const form = el(
    "form",
    { class: "panel new-form", novalidate: true },
    el("div", { class: "page-head" }, el("h1", {}, "New experiment"), el("a", { href: "#/" }, "Cancel")),
    el("details", { class: "file-load" }, el("summary", {}, "Load a config file (JSON or YAML)"), el("div", { class: "fields" }, fileInput, pasteArea, applyBtn, fileMsg)),
    formError,
    unknownBox,
    el(
      "fieldset",
      {},
      el("legend", {}, "Experiment"),
      el(
        "div",
        { class: "fields" },
        plainField("name", nameInput, "Shown in the experiments table.", nameError),
        plainField("tags", tagsInput, "Comma-separated labels to filter and group experiments by.", tagsError),
        plainField(
          "evaluation_every",
          everyInput,
          "Watch it learn: a one-episode video of every N-th checkpoint (every N × checkpoint_every iterations) and of the final one, as it trains (0: none).",
          everyError,
        ),
      ),
    ),
    sections.basic,
    advanced,
    el("datalist", { id: "env-ids" }, ENV_IDS.map((e) => el("option", { value: e }))),
    el("div", { class: "form-actions" }, submit),
  );
  root.appendChild(form);

  function setValues(config: Record<string, unknown>): void {
    for (const v of views.values()) writeInput(v, getPath(config, v.spec.path));
    // Anything the form has no input for is kept and sent, so the API names it if it is wrong.
    extras = {};
    for (const [path, value] of flatten(config)) {
      if (views.has(path) || [...views.keys()].some((p) => path.startsWith(`${p}.`))) continue;
      setPath(extras, path, value);
    }
    renderUnknown();
  }

  /** Keys the form has no input for, each with a "did you mean" and a way out: PPOConfig
   * refuses unknown keys, so hiding them would make every submit fail. */
  function renderUnknown(): void {
    clear(unknownBox);
    const unknown = [...flatten(extras)];
    unknownBox.hidden = unknown.length === 0;
    if (!unknown.length) return;
    const known = [...views.keys()];
    unknownBox.append(
      el("strong", {}, `${unknown.length === 1 ? "This key is" : "These keys are"} not PPOConfig fields; the experiment cannot be created with ${unknown.length === 1 ? "it" : "them"}:`),
      el(
        "ul",
        {},
        unknown.map(([path, value]) => {
          const guess = suggestField(path, known);
          const remove = el("button", { type: "button", class: "btn secondary small", "data-action": "remove-key" }, "Remove");
          remove.addEventListener("click", () => {
            deletePath(extras, path);
            renderUnknown();
          });
          const item = el("li", { "data-unknown-key": path }, el("code", {}, `${path} = ${JSON.stringify(value)}`), guess ? ` — did you mean ${guess}? ` : " — no field of that name. ");
          if (guess) {
            const use = el("button", { type: "button", class: "btn secondary small", "data-action": "use-suggestion" }, `Use as ${guess}`);
            use.addEventListener("click", () => {
              const view = views.get(guess) as FieldView;
              writeInput(view, value);
              touched.add(guess);
              view.wrap.removeAttribute("data-from-preset");
              deletePath(extras, path);
              renderUnknown();
            });
            item.append(use, " ");
          }
          item.append(remove);
          return item;
        }),
      ),
    );
  }
  const budgetNote = el("p", { class: "field-note muted", "data-role": "budget-note", "aria-live": "polite" });
  views.get("stop.env_steps")?.wrap.append(budgetNote);
  /** A budget runs in whole iterations: say where one that is not a multiple really ends. */
  function updateBudgetNote(): void {
    const num = (path: string): number => {
      const v = views.get(path);
      return v ? Number(readInput(v)) : NaN;
    };
    const budget = num("stop.env_steps");
    const batch = num("train_batch_size_per_learner") * Math.max(1, num("num_learners") || 0);
    const ends = Math.ceil(budget / batch) * batch;
    const show = budget > 0 && batch > 0 && Number.isFinite(ends) && ends !== budget;
    budgetNote.textContent = show
      ? `Training runs whole iterations of ${batch.toLocaleString("en-US")} env steps (train_batch_size_per_learner × learners): ` +
        `this budget ends at ${ends.toLocaleString("en-US")} steps.`
      : "";
    budgetNote.hidden = !show;
  }
  setValues(DEFAULTS);
  nameInput.value = defaultName(String(DEFAULTS.env_id ?? "experiment"));
  views.get("env_id")?.wrap.after(presetNote);

  /** Untouched inputs take the resolved values; the preset's fields are marked. */
  function showResolved(r: ResolvedConfig): void {
    for (const v of views.values()) {
      const own = touched.has(v.spec.path) || PRESET_INPUTS.has(v.spec.path);
      if (!own) writeInput(v, getPath(r.config, v.spec.path));
      v.wrap.toggleAttribute("data-from-preset", !own && presetSets(v.spec.path, r.preset_fields));
    }
    updateBudgetNote();
    presetNote.dataset.preset = r.preset;
    presetNote.textContent =
      r.preset === "none"
        ? "No preset for this env: PPOConfig's defaults."
        : `Preset ${r.preset}${r.env_settings ? ` with ${r.env_settings} settings` : ""}: sets ` +
          `${r.preset_fields.length} field${r.preset_fields.length === 1 ? "" : "s"} (marked “preset”; ` +
          `typing a value overrides it). Source: ${r.sources.join("; ")}.`;
  }

  let resolveSeq = 0;
  /** Ask the API what the chosen fields resolve to; only the latest answer is shown. */
  async function refreshPreset(): Promise<void> {
    const seq = ++resolveSeq;
    const values = new Map<string, unknown>();
    for (const v of views.values()) {
      if (!touched.has(v.spec.path) && !PRESET_INPUTS.has(v.spec.path)) continue;
      const parsed = parseValue(v.spec, readInput(v));
      if (!parsed.ok) return; // the field shows its error on submit
      values.set(v.spec.path, parsed.value);
    }
    try {
      // Unknown keys are listed in their own box; they would only make the preset unreadable.
      const resolved = await api.resolvePreset(chosenConfig(values, touched, {}));
      if (!closed && seq === resolveSeq) showResolved(resolved);
    } catch (e) {
      if (closed || seq !== resolveSeq) return;
      presetNote.dataset.preset = "";
      presetNote.textContent = `The preset cannot be shown: ${e instanceof ApiError && e.fields.length ? e.fields.map((f) => `${f.field}: ${f.message}`).join("; ") : (e as Error).message}`;
    }
  }

  let nameEdited = false;
  nameInput.addEventListener("input", () => (nameEdited = true));
  let refreshTimer: number | undefined;
  for (const v of views.values()) {
    if (BUDGET_INPUTS.has(v.spec.path)) v.input.addEventListener("input", updateBudgetNote);
    v.input.addEventListener("input", () => {
      if (v.spec.path === "env_id" && !nameEdited) nameInput.value = defaultName(String(readInput(v)) || "experiment");
      if (PRESET_INPUTS.has(v.spec.path)) {
        window.clearTimeout(refreshTimer);
        refreshTimer = window.setTimeout(() => void refreshPreset(), 400);
        return;
      }
      touched.add(v.spec.path);
      v.wrap.removeAttribute("data-from-preset");
    });
    if (PRESET_INPUTS.has(v.spec.path)) v.input.addEventListener("change", () => void refreshPreset());
  }
  void refreshPreset();

  function loaded(config: Record<string, unknown>, name: string | undefined, tags: string[] | undefined, message: string, every?: number): void {
    // A config written before evaluation_every left PPOConfig holds it at its top: its input is here.
    const { evaluation_every: inConfig, ...rest } = config;
    config = rest;
    const videos = every ?? (typeof inConfig === "number" ? inConfig : undefined);
    if (videos !== undefined) everyInput.value = String(videos);
    setValues(deepMerge(DEFAULTS, config));
    for (const path of views.keys()) if (getPath(config, path) !== undefined) touched.add(path);
    void refreshPreset();
    if (name) nameInput.value = name;
    if (tags) tagsInput.value = tags.join(", ");
    const unknown = flatten(extras).size;
    fileMsg.textContent = unknown ? `${message} ${unknown} key${unknown === 1 ? " is" : "s are"} not config fields: see above the form.` : message;
    fileMsg.className = unknown ? "field-error" : "muted";
    if (unknown) unknownBox.scrollIntoView({ block: "center" });
  }

  async function applyText(text: string, source: string): Promise<void> {
    try {
      const sub = await parseConfigText(text);
      if (!closed) loaded(sub.config, sub.name, sub.tags, `Loaded ${source}.`, sub.evaluationEvery);
    } catch (e) {
      fileMsg.textContent = `Could not load ${source}: ${(e as Error).message}`;
      fileMsg.className = "field-error";
    }
  }
  let forkedFrom: number | null = null; // set when the form opened as a fork (?from=ID)
  fileInput.addEventListener("change", async () => {
    const f = fileInput.files?.[0];
    if (f) await applyText(await f.text(), f.name);
  });
  applyBtn.addEventListener("click", () => void applyText(pasteArea.value, "the pasted text"));

  // Fork: start from another experiment's config; the new one keeps it as its parent.
  const from = query.get("from");
  if (from && /^\d+$/.test(from)) {
    api
      .get(Number(from))
      .then((src) => {
        if (closed) return;
        loaded(src.config, `${src.name}-fork`, src.tags, `Config copied from #${src.id} “${src.name}”.`, src.evaluation_every);
        forkedFrom = src.id;
      })
      .catch((e) => showFormErrors([`Could not load experiment ${from}: ${(e as Error).message}`]));
  }
  // Fork a study's best trial: its config (GET /studies/{id}/best), its run as the parent.
  const study = query.get("study");
  if (study && /^\d+$/.test(study)) {
    loadBestTrial(Number(study))
      .then((src) => {
        if (closed) return;
        loaded(src.config, `${src.name}-fork`, src.tags, `Config of trial #${src.trial}, the best of study ${study}.`);
        forkedFrom = src.experimentId;
      })
      .catch((e) => showFormErrors([`Could not load the best trial of study ${study}: ${(e as Error).message}`]));
  }

  function showFormErrors(messages: string[]): void {
    clear(formError);
    formError.hidden = messages.length === 0;
    if (messages.length) formError.append(el("strong", {}, "The experiment was not created:"), el("ul", {}, messages.map((m) => el("li", {}, m))));
  }

  function clearErrors(): void {
    showFormErrors([]);
    setFieldError({ error: nameError }, "");
    setFieldError({ error: tagsError }, "");
    setFieldError({ error: everyError }, "");
    for (const v of views.values()) setFieldError(v, "");
  }

  /** The user's part of the config (touched fields, env id, preset); the server resolves the
   * rest. Fields that cannot be read are marked and make it null. */
  function collect(): PPOConfig | null {
    const values = new Map<string, unknown>();
    let ok = true;
    for (const v of views.values()) {
      const parsed = parseValue(v.spec, readInput(v));
      if (parsed.ok) values.set(v.spec.path, parsed.value);
      else {
        ok = false;
        setFieldError(v, parsed.error);
      }
    }
    return ok ? chosenConfig(values, touched, extras) : null;
  }

  function showApiErrors(err: ApiError): void {
    const placed = placeFieldErrors(err.fields, (p) => views.has(p));
    let first: HTMLElement | null = null;
    for (const [place, messages] of placed.byField) {
      const msg = messages.join("; ");
      if (place === "name") setFieldError({ error: nameError }, msg);
      else if (place === "tags") setFieldError({ error: tagsError }, msg);
      else if (place === "evaluation_every") setFieldError({ error: everyError }, msg);
      else {
        const view = views.get(place) as FieldView;
        setFieldError(view, msg);
        if (view.spec.advanced) advanced.open = true;
        first ??= view.wrap;
      }
    }
    const n = placed.byField.size;
    if (placed.general.length || n === 0) showFormErrors(placed.general.length ? placed.general : [err.message]);
    else showFormErrors([`${n} field${n > 1 ? "s need" : " needs"} fixing (marked below).`]);
    (first ?? formError).scrollIntoView({ block: "center" });
  }

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clearErrors();
    const config = collect();
    if (!config) {
      showFormErrors(["Some fields could not be read (marked below)."]);
      return;
    }
    const tags = tagsInput.value.split(",").map((t) => t.trim()).filter(Boolean);
    const every = everyInput.value.trim() === "" ? 0 : Number(everyInput.value);
    if (!Number.isInteger(every) || every < 0) {
      setFieldError({ error: everyError }, "a whole number, 0 or more");
      showFormErrors(["Some fields could not be read (marked below)."]);
      return;
    }
    submit.disabled = true;
    submit.textContent = "Creating…";
    try {
      const created = await api.create(nameInput.value.trim(), config, tags, forkedFrom, every);
      location.hash = `#/experiments/${created.id}`;
    } catch (e) {
      if (e instanceof ApiError && e.status === 422) showApiErrors(e);
      else showFormErrors([e instanceof Error ? e.message : String(e)]);
    } finally {
      submit.disabled = false;
      submit.textContent = "Create and start";
    }
  });

  return () => {
    closed = true;
  };
}

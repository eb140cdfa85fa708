/**
 * New-experiment form, built from PPOConfig's schema: defaults filled in, every field explained,
 * rarely changed fields under "Advanced", a JSON / YAML file can be pasted or uploaded. The
 * API's 422 errors are shown next to their field. Submitting opens the new experiment.
 */

import { api, ApiError } from "../api/client";
import type { FieldError, PPOConfig } from "../api/types";
import { deepMerge, parseConfigText } from "../form/configFile";
import { DEFAULTS, ENV_IDS, GROUP_ORDER, fieldSpecs, formatValue, getPath, parseValue, setPath, type FieldSpec } from "../form/fields";
import { flatten } from "../data/configDiff";
import { clear, el } from "../ui/dom";

interface FieldView {
  spec: FieldSpec;
  input: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;
  error: HTMLElement;
  wrap: HTMLElement;
}

function defaultName(envId: string): string {
  const d = new Date();
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${envId.toLowerCase().replace(/[^a-z0-9]+/g, "-")}-${pad(d.getMonth() + 1)}${pad(d.getDate())}-${pad(d.getHours())}${pad(d.getMinutes())}${pad(d.getSeconds())}`;
}

export function mountNew(root: HTMLElement, query: URLSearchParams): () => void {
  document.title = "New experiment · Rollout";
  let closed = false;
  const specs = fieldSpecs();
  const views = new Map<string, FieldView>();
  /** Keys from a loaded file that the form has no input for: sent as-is so the API can judge. */
  let extras: Record<string, unknown> = {};

  const nameInput = el("input", { name: "name", id: "f-name", required: true, autocomplete: "off" });
  const nameError = el("p", { class: "field-error", "data-error-for": "name" });
  const tagsInput = el("input", { name: "tags", id: "f-tags", placeholder: "baseline, cartpole", autocomplete: "off" });
  const tagsError = el("p", { class: "field-error", "data-error-for": "tags" });
  const formError = el("div", { class: "error-box", hidden: true, role: "alert" });
  const submit = el("button", { type: "submit", class: "btn" }, "Create and start");
  const fileInput = el("input", { type: "file", accept: ".json,.yaml,.yml,application/json,text/yaml", "aria-label": "Upload a JSON or YAML config" });
  const pasteArea = el("textarea", { rows: 6, name: "paste", placeholder: "Paste a JSON or YAML config (or {name, tags, config}) and press Apply" });
  const fileMsg = el("p", { class: "muted", "aria-live": "polite" });

  function fieldView(spec: FieldSpec): FieldView {
    const id = `f-${spec.path.replace(/\./g, "-")}`;
    let input: FieldView["input"];
    if (spec.kind === "boolean") {
      input = el("input", { type: "checkbox", id });
    } else if (spec.kind === "enum") {
      input = el("select", { id }, spec.options.map((o) => el("option", { value: o }, o)));
    } else if (spec.kind === "json") {
      input = el("textarea", { id, rows: 2, spellcheck: "false" });
    } else {
      const type = spec.kind === "integer" || spec.kind === "number" ? "text" : "text";
      input = el("input", { id, type, autocomplete: "off", inputmode: spec.kind === "integer" ? "numeric" : spec.kind === "number" ? "decimal" : null });
      if (spec.path === "env_id") input.setAttribute("list", "env-ids");
    }
    input.setAttribute("name", `config.${spec.path}`);
    input.dataset.path = spec.path;
    const error = el("p", { class: "field-error", "data-error-for": `config.${spec.path}` });
    const def = formatValue(spec, spec.defaultValue);
    const help = el(
      "p",
      { class: "help", id: `${id}-help` },
      spec.description,
      el("span", { class: "default" }, ` Default: ${def === "" ? (spec.nullable ? "none" : "empty") : def}.`),
      spec.bounds ? el("span", { class: "bounds" }, ` Allowed: ${spec.bounds}.`) : "",
      spec.nullable ? el("span", {}, " Leave empty for none.") : "",
    );
    input.setAttribute("aria-describedby", `${id}-help`);
    input.title = spec.description;
    const wrap = el(
      "div",
      { class: `field kind-${spec.kind}`, "data-field": spec.path },
      spec.kind === "boolean" ? el("label", { for: id, class: "check" }, input, ` ${spec.label}`) : [el("label", { for: id }, spec.label), input],
      help,
      error,
    );
    input.addEventListener("input", () => setFieldError(view, ""));
    const view: FieldView = { spec, input, error, wrap };
    return view;
  }

  function setFieldError(v: { error: HTMLElement; wrap?: HTMLElement }, msg: string): void {
    v.error.textContent = msg;
    v.wrap?.classList.toggle("invalid", Boolean(msg));
  }

  function setValues(config: Record<string, unknown>): void {
    for (const v of views.values()) {
      const value = getPath(config, v.spec.path);
      if (v.input instanceof HTMLInputElement && v.input.type === "checkbox") v.input.checked = Boolean(value);
      else v.input.value = formatValue(v.spec, value);
    }
    // Anything the form has no input for is kept and sent, so the API names it if it is wrong.
    extras = {};
    for (const [path, value] of flatten(config)) {
      if (views.has(path)) continue;
      if ([...views.keys()].some((p) => path.startsWith(`${p}.`))) continue; // inside env_config
      setPath(extras, path, value);
    }
  }

  // ---- layout -----------------------------------------------------------------------------------
  const groups = new Map<string, { basic: HTMLElement; advanced: HTMLElement }>();
  for (const spec of specs) {
    const v = fieldView(spec);
    views.set(spec.path, v);
    let g = groups.get(spec.group);
    if (!g) {
      g = { basic: el("div", { class: "fields" }), advanced: el("div", { class: "fields" }) };
      groups.set(spec.group, g);
    }
    (spec.advanced ? g.advanced : g.basic).appendChild(v.wrap);
  }
  const basicSets: HTMLElement[] = [];
  const advancedSets: HTMLElement[] = [];
  for (const [name, g] of [...groups].sort((a, b) => GROUP_ORDER.indexOf(a[0]) - GROUP_ORDER.indexOf(b[0]))) {
    if (g.basic.children.length) basicSets.push(el("fieldset", {}, el("legend", {}, name), g.basic));
    if (g.advanced.children.length) advancedSets.push(el("fieldset", {}, el("legend", {}, name), g.advanced));
  }
  const advanced = el("details", { class: "advanced" }, el("summary", {}, "Advanced"), advancedSets);

  const form = el(
    "form",
    { class: "panel new-form", novalidate: true },
    el("div", { class: "page-head" }, el("h1", {}, "New experiment"), el("a", { href: "#/" }, "Cancel")),
    el(
      "details",
      { class: "file-load" },
      el("summary", {}, "Load a config file (JSON or YAML)"),
      el("div", { class: "fields" }, fileInput, pasteArea, el("button", { type: "button", class: "btn secondary", "data-action": "apply-paste" }, "Apply"), fileMsg),
    ),
    formError,
    el(
      "fieldset",
      {},
      el("legend", {}, "Experiment"),
      el(
        "div",
        { class: "fields" },
        el("div", { class: "field", "data-field": "name" }, el("label", { for: "f-name" }, "name"), nameInput, el("p", { class: "help" }, "Shown in the experiments table."), nameError),
        el("div", { class: "field", "data-field": "tags" }, el("label", { for: "f-tags" }, "tags"), tagsInput, el("p", { class: "help" }, "Comma-separated labels to filter and group experiments by."), tagsError),
      ),
    ),
    basicSets,
    advanced,
    el("datalist", { id: "env-ids" }, ENV_IDS.map((e) => el("option", { value: e }))),
    el("div", { class: "form-actions" }, submit),
  );
  root.appendChild(form);
  setValues(DEFAULTS);
  nameInput.value = defaultName(String(DEFAULTS.env_id ?? "experiment"));

  // ---- file load ----------------------------------------------------------------------------------
  async function applyText(text: string, source: string): Promise<void> {
    try {
      const sub = await parseConfigText(text);
      if (closed) return;
      setValues(deepMerge(DEFAULTS, sub.config));
      if (sub.name) nameInput.value = sub.name;
      if (sub.tags) tagsInput.value = sub.tags.join(", ");
      fileMsg.textContent = `Loaded ${source}.`;
      fileMsg.className = "muted";
      if (Object.keys(extras).length) advanced.open = true;
    } catch (e) {
      fileMsg.textContent = `Could not load ${source}: ${(e as Error).message}`;
      fileMsg.className = "field-error";
    }
  }
  fileInput.addEventListener("change", async () => {
    const f = fileInput.files?.[0];
    if (f) await applyText(await f.text(), f.name);
  });
  form.querySelector("[data-action=apply-paste]")?.addEventListener("click", () => void applyText(pasteArea.value, "the pasted text"));

  // Fork: start from another experiment's config.
  const from = query.get("from");
  if (from && /^\d+$/.test(from)) {
    api
      .get(Number(from))
      .then((src) => {
        if (closed) return;
        setValues(deepMerge(DEFAULTS, src.config));
        nameInput.value = `${src.name}-fork`;
        tagsInput.value = src.tags.join(", ");
        fileMsg.textContent = `Config copied from #${src.id} “${src.name}”.`;
      })
      .catch((e) => showFormErrors([`Could not load experiment ${from}: ${(e as Error).message}`]));
  }

  // ---- submit -------------------------------------------------------------------------------------
  function showFormErrors(messages: string[]): void {
    clear(formError);
    formError.hidden = messages.length === 0;
    if (messages.length) formError.append(el("strong", {}, "The experiment was not created:"), el("ul", {}, messages.map((m) => el("li", {}, m))));
  }

  function collect(): { config: PPOConfig; ok: boolean } {
    const config: Record<string, unknown> = structuredClone(extras);
    let ok = true;
    for (const v of views.values()) {
      const raw = v.input instanceof HTMLInputElement && v.input.type === "checkbox" ? v.input.checked : v.input.value;
      const parsed = parseValue(v.spec, raw);
      if (parsed.ok) setPath(config, v.spec.path, parsed.value);
      else {
        ok = false;
        setFieldError(v, parsed.error);
      }
    }
    return { config, ok };
  }

  function showApiErrors(err: ApiError): void {
    const general: string[] = [];
    let first: HTMLElement | null = null;
    for (const f of err.fields as FieldError[]) {
      const path = f.field.replace(/^body\./, "");
      if (path === "name") setFieldError({ error: nameError }, f.message);
      else if (path === "tags" || path.startsWith("tags.")) setFieldError({ error: tagsError }, f.message);
      else {
        // The deepest field with an input: config.stop.env_steps -> stop.env_steps.
        let p = path.replace(/^config\.?/, "");
        let view = views.get(p);
        while (!view && p.includes(".")) {
          p = p.slice(0, p.lastIndexOf("."));
          view = views.get(p);
        }
        if (view) {
          setFieldError(view, f.message);
          if (view.spec.advanced) advanced.open = true;
          first ??= view.wrap;
        } else general.push(`${path || "config"}: ${f.message}`);
      }
    }
    if (general.length || !err.fields.length) showFormErrors(general.length ? general : [err.message]);
    else showFormErrors([`${err.fields.length} field${err.fields.length > 1 ? "s need" : " needs"} fixing (marked below).`]);
    (first ?? formError).scrollIntoView({ block: "center" });
  }

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    showFormErrors([]);
    setFieldError({ error: nameError }, "");
    setFieldError({ error: tagsError }, "");
    for (const v of views.values()) setFieldError(v, "");
    const { config, ok } = collect();
    if (!ok) {
      showFormErrors(["Some fields could not be read (marked below)."]);
      return;
    }
    const tags = tagsInput.value.split(",").map((t) => t.trim()).filter(Boolean);
    submit.disabled = true;
    submit.textContent = "Creating…";
    try {
      const created = await api.create(nameInput.value.trim(), config, tags);
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

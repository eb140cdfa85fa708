/** One form field for a PPOConfig path: label, input of the right kind, help text, error slot. */

import { el } from "../ui/dom";
import { formatValue, type FieldSpec } from "./fields";

export interface FieldView {
  spec: FieldSpec;
  input: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;
  error: HTMLElement;
  wrap: HTMLElement;
}

function makeInput(spec: FieldSpec, id: string): FieldView["input"] {
  switch (spec.kind) {
    case "boolean":
      return el("input", { type: "checkbox", id });
    case "enum":
      return el("select", { id }, spec.options.map((o) => el("option", { value: o }, o)));
    case "json":
      return el("textarea", { id, rows: 2, spellcheck: "false" });
    default: {
      const inputmode = spec.kind === "integer" ? "numeric" : spec.kind === "number" ? "decimal" : null;
      const input = el("input", { id, type: "text", autocomplete: "off", inputmode });
      if (spec.path === "env_id") input.setAttribute("list", "env-ids");
      return input;
    }
  }
}

/** The help line: the field's description, its default, its bounds. */
function helpText(spec: FieldSpec, id: string): HTMLElement {
  const def = formatValue(spec, spec.defaultValue);
  return el(
    "p",
    { class: "help", id },
    spec.description,
    el("span", { class: "default" }, ` Default: ${def === "" ? (spec.nullable ? "none" : "empty") : def}.`),
    spec.bounds ? el("span", { class: "bounds" }, ` Allowed: ${spec.bounds}.`) : "",
    spec.nullable ? el("span", {}, " Leave empty for none.") : "",
  );
}

export function fieldView(spec: FieldSpec): FieldView {
  const id = `f-${spec.path.replace(/\./g, "-")}`;
  const input = makeInput(spec, id);
  input.setAttribute("name", `config.${spec.path}`);
  input.setAttribute("aria-describedby", `${id}-help`);
  input.dataset.path = spec.path;
  input.title = spec.description;
  const error = el("p", { class: "field-error", "data-error-for": `config.${spec.path}` });
  const label = spec.kind === "boolean" ? el("label", { for: id, class: "check" }, input, ` ${spec.label}`) : [el("label", { for: id }, spec.label), input];
  const wrap = el("div", { class: `field kind-${spec.kind}`, "data-field": spec.path }, label, helpText(spec, `${id}-help`), error);
  const view = { spec, input, error, wrap };
  input.addEventListener("input", () => setFieldError(view, ""));
  return view;
}

export function setFieldError(v: { error: HTMLElement; wrap?: HTMLElement }, msg: string): void {
  v.error.textContent = msg;
  v.wrap?.classList.toggle("invalid", Boolean(msg));
}

export function readInput(v: FieldView): string | boolean {
  return v.input instanceof HTMLInputElement && v.input.type === "checkbox" ? v.input.checked : v.input.value;
}

export function writeInput(v: FieldView, value: unknown): void {
  if (v.input instanceof HTMLInputElement && v.input.type === "checkbox") v.input.checked = Boolean(value);
  else v.input.value = formatValue(v.spec, value);
}

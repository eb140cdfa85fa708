/**
 * Where each of the API's 422 field errors goes on the form: "name", "tags", or the deepest
 * config path that has an input (`config.stop.env_steps` -> `stop.env_steps`; an error inside
 * `env_config` lands on `env_config`). Errors with no such place are listed above the form.
 */

import type { FieldError } from "../api/types";

export interface PlacedErrors {
  /** Form place ("name", "tags" or a config path) -> messages. */
  byField: Map<string, string[]>;
  general: string[];
}

export function placeFieldErrors(fields: readonly FieldError[], hasInput: (path: string) => boolean): PlacedErrors {
  const byField = new Map<string, string[]>();
  const general: string[] = [];
  const put = (place: string, message: string) => byField.set(place, [...(byField.get(place) ?? []), message]);
  for (const f of fields) {
    const path = f.field.replace(/^body\./, "");
    if (path === "name") put("name", f.message);
    else if (path === "tags" || path.startsWith("tags.")) put("tags", f.message);
    else if (path === "evaluation_every") put("evaluation_every", f.message);
    else if (path.startsWith("config.")) {
      let p = path.slice("config.".length);
      while (!hasInput(p) && p.includes(".")) p = p.slice(0, p.lastIndexOf("."));
      if (hasInput(p)) put(p, f.message);
      else general.push(`${path}: ${f.message}`);
    } else general.push(`${path || "config"}: ${f.message}`);
  }
  return { byField, general };
}

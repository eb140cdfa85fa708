/** Config differences for the compare page: which (nested) fields differ between experiments. */

export type Flat = Map<string, unknown>;

/** Flatten nested objects into dotted paths; arrays and scalars are leaves. */
export function flatten(obj: unknown, prefix = "", out: Flat = new Map()): Flat {
  if (obj !== null && typeof obj === "object" && !Array.isArray(obj)) {
    const entries = Object.entries(obj as Record<string, unknown>);
    if (entries.length === 0 && prefix) out.set(prefix, {});
    for (const [k, v] of entries) flatten(v, prefix ? `${prefix}.${k}` : k, out);
  } else if (prefix) {
    out.set(prefix, obj);
  }
  return out;
}

export interface DiffRow {
  path: string;
  /** One entry per config, `undefined` where that config lacks the field. */
  values: unknown[];
}

/** Fields whose value is not the same in all configs, sorted by path. */
export function diffConfigs(configs: readonly unknown[]): DiffRow[] {
  const flats = configs.map((c) => flatten(c));
  const paths = new Set<string>();
  for (const f of flats) for (const k of f.keys()) paths.add(k);
  const rows: DiffRow[] = [];
  for (const path of [...paths].sort()) {
    const values = flats.map((f) => f.get(path));
    const keys = new Set(values.map((v) => (v === undefined ? "\u0000missing" : JSON.stringify(v))));
    if (keys.size > 1) rows.push({ path, values });
  }
  return rows;
}

/** The experiments page's filter, applied to live updates the same way the server applies it. */

import type { Experiment } from "../api/types";

export interface Filter {
  status: string;
  tag: string;
  name: string;
}

/** Exact status, case-insensitive tag and name substrings (the server's `tag_contains` and
 * `name`); empty means "any". */
export function matches(exp: Experiment, f: Filter): boolean {
  if (f.status && exp.status !== f.status) return false;
  const tag = f.tag.toLowerCase();
  if (tag && !exp.tags.some((t) => t.toLowerCase().includes(tag))) return false;
  if (f.name && !exp.name.toLowerCase().includes(f.name.toLowerCase())) return false;
  return true;
}

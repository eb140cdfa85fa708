/** A list of values as typed into one box (a sweep's grid values, a study's choices). */

/** "0.001, 0.0003" or a JSON list ("[[64, 64], [128, 128]]"): each value JSON, else text. */
export function parseValues(text: string): unknown[] {
  const t = text.trim();
  if (!t) return [];
  if (t.startsWith("[")) {
    const list: unknown = JSON.parse(t);
    if (!Array.isArray(list)) throw new Error("expected a list");
    return list;
  }
  return t.split(",").map((part) => {
    const p = part.trim();
    try {
      return JSON.parse(p);
    } catch {
      return p;
    }
  });
}

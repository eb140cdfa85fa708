/** Hash routes (#/experiments/7), so the server needs no fallback for client routes. */

export interface Route {
  name: "list" | "new" | "detail" | "compare" | "sweeps" | "sweep" | "studies" | "study" | "notfound";
  id?: number;
  query: URLSearchParams;
}

export function parseRoute(hash: string): Route {
  const raw = hash.replace(/^#/, "") || "/";
  const [path, qs = ""] = raw.split("?", 2);
  const query = new URLSearchParams(qs);
  const parts = path.split("/").filter(Boolean);
  if (parts.length === 0 || (parts.length === 1 && parts[0] === "experiments")) return { name: "list", query };
  if (parts.length === 1 && parts[0] === "new") return { name: "new", query };
  if (parts.length === 1 && parts[0] === "compare") return { name: "compare", query };
  if (parts.length === 1 && parts[0] === "sweeps") return { name: "sweeps", query };
  if (parts.length === 2 && parts[0] === "sweeps" && /^\d+$/.test(parts[1])) {
    return { name: "sweep", id: Number(parts[1]), query };
  }
  if (parts.length === 1 && parts[0] === "studies") return { name: "studies", query };
  if (parts.length === 2 && parts[0] === "studies" && /^\d+$/.test(parts[1])) {
    return { name: "study", id: Number(parts[1]), query };
  }
  if (parts.length === 2 && parts[0] === "experiments" && /^\d+$/.test(parts[1])) {
    return { name: "detail", id: Number(parts[1]), query };
  }
  return { name: "notfound", query };
}

export function go(hash: string): void {
  location.hash = hash;
}

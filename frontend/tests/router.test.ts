import { describe, expect, it } from "vitest";
import { parseRoute } from "../src/router";

describe("parseRoute", () => {
  it("maps hashes to pages", () => {
    expect(parseRoute("").name).toBe("list");
    expect(parseRoute("#/").name).toBe("list");
    expect(parseRoute("#/new").name).toBe("new");
    expect(parseRoute("#/new?from=3").query.get("from")).toBe("3");
    const d = parseRoute("#/experiments/42");
    expect([d.name, d.id]).toEqual(["detail", 42]);
    expect(parseRoute("#/compare?ids=1,2").query.get("ids")).toBe("1,2");
    expect(parseRoute("#/experiments/abc").name).toBe("notfound");
    expect(parseRoute("#/sweeps").name).toBe("sweeps");
    const sw = parseRoute("#/sweeps/7");
    expect([sw.name, sw.id]).toEqual(["sweep", 7]);
    expect(parseRoute("#/sweeps/x").name).toBe("notfound");
    expect(parseRoute("#/studies").name).toBe("studies");
    const st = parseRoute("#/studies/3");
    expect([st.name, st.id]).toEqual(["study", 3]);
    expect(parseRoute("#/studies/3/x").name).toBe("notfound");
    expect(parseRoute("#/new?study=3").query.get("study")).toBe("3");
  });
});

import { describe, expect, it } from "vitest";
import type { Experiment } from "../src/api/types";
import { matches } from "../src/data/filter";

const exp = { name: "CartPole Baseline", tags: ["a", "b"], status: "running" } as Experiment;

describe("matches", () => {
  it("applies status, tag and name like the server", () => {
    expect(matches(exp, { status: "", tag: "", name: "" })).toBe(true);
    expect(matches(exp, { status: "running", tag: "b", name: "pole basx" })).toBe(false);
    expect(matches(exp, { status: "running", tag: "b", name: "pole bas" })).toBe(true);
    expect(matches(exp, { status: "failed", tag: "", name: "" })).toBe(false);
    expect(matches(exp, { status: "", tag: "c", name: "" })).toBe(false);
  });
  it("matches part of a tag, ignoring case", () => {
    const tagged = { ...exp, tags: ["Baseline-v2", "tuned"] } as Experiment;
    expect(matches(tagged, { status: "", tag: "BASE", name: "" })).toBe(true);
    expect(matches(tagged, { status: "", tag: "une", name: "" })).toBe(true);
    expect(matches(tagged, { status: "", tag: "v3", name: "" })).toBe(false);
  });
});

import { describe, expect, it } from "vitest";
import { deletePath, editDistance, suggestField } from "../src/form/unknownKeys";

const KNOWN = ["lr", "entropy_coeff", "num_epochs", "stop.env_steps", "gamma", "clip_param", "minibatch_size"];

describe("suggestField", () => {
  it("maps other libraries' names to PPOConfig's", () => {
    expect(suggestField("learning_rate", KNOWN)).toBe("lr");
    expect(suggestField("ent_coef", KNOWN)).toBe("entropy_coeff");
    expect(suggestField("n_epochs", KNOWN)).toBe("num_epochs");
  });
  it("catches typos, also below a section", () => {
    expect(suggestField("gama", KNOWN)).toBe("gamma");
    expect(suggestField("stop.env_step", KNOWN)).toBe("stop.env_steps");
    expect(suggestField("entropy_coef", KNOWN)).toBe("entropy_coeff");
  });
  it("suggests nothing for a name far from every field", () => {
    expect(suggestField("wandb_project", KNOWN)).toBeNull();
  });
  it("measures edits", () => {
    expect(editDistance("kitten", "sitting")).toBe(3);
    expect(editDistance("", "ab")).toBe(2);
  });
});

describe("deletePath", () => {
  it("removes a key and the sections it empties", () => {
    const obj: Record<string, unknown> = { stop: { foo: 1 }, bar: 2 };
    deletePath(obj, "stop.foo");
    expect(obj).toEqual({ bar: 2 });
  });
});

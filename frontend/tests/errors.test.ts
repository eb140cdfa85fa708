import { describe, expect, it } from "vitest";
import { placeFieldErrors } from "../src/form/errors";

const inputs = new Set(["lr", "stop.env_steps", "env_config", "model.hidden_sizes"]);
const hasInput = (p: string) => inputs.has(p);

describe("placeFieldErrors", () => {
  it("puts each 422 error next to the field it names", () => {
    const placed = placeFieldErrors(
      [
        { field: "config.lr", message: "Input should be greater than 0" },
        { field: "config.stop.env_steps", message: "too small" },
        { field: "config.env_config.g", message: "bad" },
        { field: "config.model.hidden_sizes.1", message: "not an int" },
        { field: "name", message: "too short" },
        { field: "tags.0", message: "too long" },
        { field: "config", message: "minibatch_size must not exceed train_batch_size_per_learner" },
        { field: "config.nonsense", message: "Extra inputs are not permitted" },
      ],
      hasInput,
    );
    expect(Object.fromEntries(placed.byField)).toEqual({
      lr: ["Input should be greater than 0"],
      "stop.env_steps": ["too small"],
      env_config: ["bad"],
      "model.hidden_sizes": ["not an int"],
      name: ["too short"],
      tags: ["too long"],
    });
    expect(placed.general).toEqual([
      "config: minibatch_size must not exceed train_batch_size_per_learner",
      "config.nonsense: Extra inputs are not permitted",
    ]);
  });
});

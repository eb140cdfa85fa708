import { describe, expect, it } from "vitest";
import { MAX_THUMBS, thumbIndices } from "../src/pages/detail/filmstrip";

describe("filmstrip thumbnails", () => {
  it("shows every frame while they fit", () => {
    expect(thumbIndices(4, 2)).toEqual([0, 1, 2, 3]);
    expect(thumbIndices(0, 0)).toEqual([]);
  });

  it("spreads at most MAX_THUMBS over many frames, keeping first, last and the selected", () => {
    for (const [n, selected] of [
      [100, 50],
      [100, 0],
      [11, 7],
      [1000, 997],
    ]) {
      const shown = thumbIndices(n, selected);
      expect(shown.length).toBeLessThanOrEqual(MAX_THUMBS);
      expect(shown.length).toBeGreaterThanOrEqual(MAX_THUMBS - 2);
      expect(shown).toContain(0);
      expect(shown).toContain(n - 1);
      expect(shown).toContain(selected);
      expect([...shown].sort((a, b) => a - b)).toEqual(shown);
      expect(new Set(shown).size).toBe(shown.length);
    }
  });
});

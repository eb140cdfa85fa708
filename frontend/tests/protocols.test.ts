import { describe, expect, it } from "vitest";
import { streamProtocols, wsUrl } from "../src/api/client";

function decode(protocol: string): string {
  const encoded = protocol.slice("rollout.token.".length);
  const binary = atob(encoded.replace(/-/g, "+").replace(/_/g, "/"));
  return new TextDecoder().decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
}

describe("websocket auth", () => {
  it("offers only the rollout subprotocol without a token", () => {
    expect(streamProtocols(null)).toEqual(["rollout"]);
  });

  it("carries any token as base64url, a valid subprotocol token", () => {
    for (const token of ["s3cret-token", "ünïcode/+= token", "a:b,c"]) {
      const [first, second] = streamProtocols(token);
      expect(first).toBe("rollout");
      expect(second).toMatch(/^rollout\.token\.[A-Za-z0-9_-]+$/);
      expect(decode(second)).toBe(token);
    }
  });

  it("never puts the token in the URL", () => {
    (globalThis as { location?: unknown }).location = { protocol: "http:", host: "127.0.0.1:8000" };
    expect(wsUrl("/stream", { since_step: 5 })).toBe("ws://127.0.0.1:8000/api/v1/stream?since_step=5");
  });
});

import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ExperimentFeed } from "../src/api/feed";
import type { SocketLike } from "../src/api/stream";

class FakeSocket implements SocketLike {
  onopen: ((ev: unknown) => void) | null = null;
  onclose: ((ev: unknown) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  constructor(readonly url: string) {}
  send(msg: unknown): void {
    this.onmessage?.({ data: JSON.stringify(msg) });
  }
  close(): void {}
}

const exp = { id: 7, name: "e", tags: [], config: {}, status: "running" };

describe("ExperimentFeed", () => {
  const requests: string[] = [];
  beforeEach(() => {
    vi.useFakeTimers();
    vi.stubGlobal("location", { protocol: "http:", host: "h:1" });
    vi.stubGlobal("localStorage", { getItem: () => null });
    vi.stubGlobal("fetch", async (url: string) => {
      requests.push(url);
      const body = { series: { episode_return_mean: { step: [100, 200], value: [1, 2] } } };
      return new Response(JSON.stringify(body), { status: 200 });
    });
  });
  afterEach(() => {
    vi.useRealTimers();
    vi.unstubAllGlobals();
  });

  it("loads downsampled history, resumes the stream after it and replaces the backlog log", async () => {
    const sockets: FakeSocket[] = [];
    const logs: [string[], boolean][] = [];
    const states: boolean[] = [];
    const feed = new ExperimentFeed(7, ["episode_return_mean"], {
      onLog: (lines, replace) => logs.push([lines, replace]),
      onState: (on) => states.push(on),
    }, (url) => {
      const s = new FakeSocket(url);
      sockets.push(s);
      return s;
    });
    await feed.start();
    expect(requests[0]).toBe("/api/v1/experiments/7/metrics?names=episode_return_mean&max_points=2000");
    expect(sockets[0].url).toBe("ws://h:1/api/v1/experiments/7/stream?since_step=200");
    sockets[0].onopen?.({});
    // Backlog: metrics, the current status with the experiment, recent log lines.
    sockets[0].send({ type: "metrics", experiment_id: 7, step: [300], series: { episode_return_mean: [3] } });
    sockets[0].send({ type: "status", experiment_id: 7, status: "running", from_status: null, reason: "current status", at: "", error: null, experiment: exp });
    sockets[0].send({ type: "log", experiment_id: 7, lines: ["a", "b"] });
    // Live.
    sockets[0].send({ type: "log", experiment_id: 7, lines: ["c"] });
    sockets[0].onclose?.({});
    await vi.advanceTimersByTimeAsync(20_000);
    expect(sockets[1].url).toBe("ws://h:1/api/v1/experiments/7/stream?since_step=300");
    sockets[1].onopen?.({});
    sockets[1].send({ type: "metrics", experiment_id: 7, step: [300, 400], series: { episode_return_mean: [3, 4] } });
    sockets[1].send({ type: "status", experiment_id: 7, status: "running", from_status: null, reason: "current status", at: "", error: null, experiment: exp });
    sockets[1].send({ type: "log", experiment_id: 7, lines: ["b", "c", "d"] });
    expect(logs).toEqual([
      [["a", "b"], true],
      [["c"], false],
      [["b", "c", "d"], true],
    ]);
    expect(feed.store.get("episode_return_mean").step).toEqual([100, 200, 300, 400]);
    expect(states).toEqual([true, false, true]);
    feed.close();
  });
});

describe("ExperimentFeed without history", () => {
  beforeEach(() => {
    vi.stubGlobal("location", { protocol: "http:", host: "h:1" });
    vi.stubGlobal("localStorage", { getItem: () => null });
    vi.stubGlobal("fetch", async () => {
      throw new TypeError("Failed to fetch");
    });
  });
  afterEach(() => vi.unstubAllGlobals());

  it("streams from the first step when the history cannot be loaded", async () => {
    const urls: string[] = [];
    const feed = new ExperimentFeed(3, ["kl"], {}, (url) => {
      urls.push(url);
      return new FakeSocket(url);
    });
    await feed.start();
    expect(urls).toEqual(["ws://h:1/api/v1/experiments/3/stream?since_step=-1"]);
    feed.close();
  });
});

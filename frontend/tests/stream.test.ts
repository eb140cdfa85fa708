import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { LiveStream, type SocketLike } from "../src/api/stream";
import type { MetricsMessage } from "../src/api/types";
import { MetricStore } from "../src/data/metricStore";

class FakeSocket implements SocketLike {
  onopen: ((ev: unknown) => void) | null = null;
  onclose: ((ev: unknown) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  closed = false;
  constructor(readonly url: string) {}
  open(): void {
    this.onopen?.({});
  }
  send(msg: unknown): void {
    this.onmessage?.({ data: JSON.stringify(msg) });
  }
  drop(): void {
    this.onclose?.({});
  }
  close(): void {
    this.closed = true;
  }
}

function metrics(steps: number[], f: (s: number) => number): MetricsMessage {
  return {
    type: "metrics",
    experiment_id: 1,
    step: steps,
    series: { episode_return_mean: steps.map(f), kl: steps.map((s) => s / 1000) },
  };
}

describe("LiveStream + MetricStore resume", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it("reconnects from the last step it holds and drops the overlapping backlog", () => {
    const store = new MetricStore(1000);
    const sockets: FakeSocket[] = [];
    const states: boolean[] = [];
    const stream = new LiveStream({
      url: () => `/stream?since_step=${store.sinceStep() ?? ""}`,
      onMessage: (m) => {
        if (m.type === "metrics") store.ingest(m);
      },
      onState: (on) => states.push(on),
      socketFactory: (url) => {
        const s = new FakeSocket(url);
        sockets.push(s);
        return s;
      },
      minDelayMs: 100,
    }).start();

    expect(sockets[0].url).toBe("/stream?since_step=");
    sockets[0].open();
    sockets[0].send(metrics([100, 200, 300], (s) => s));
    sockets[0].drop();
    expect(states).toEqual([true, false]);
    expect(stream.online).toBe(false);

    vi.advanceTimersByTime(5000);
    expect(sockets).toHaveLength(2);
    expect(sockets[1].url).toBe("/stream?since_step=300");
    sockets[1].open();
    // The server's backlog may include the step we named: it must not be duplicated.
    sockets[1].send(metrics([200, 300, 400], (s) => s + 0.5));
    expect(store.get("episode_return_mean")).toEqual({ step: [100, 200, 300, 400], value: [100, 200, 300, 400.5] });
    expect(store.get("kl").step).toEqual([100, 200, 300, 400]);
    expect(states).toEqual([true, false, true]);
    stream.close();
    expect(sockets[1].closed).toBe(true);
    vi.advanceTimersByTime(60_000);
    expect(sockets).toHaveLength(2);
  });

  it("backs off exponentially while the service is down, then resets after a connect", () => {
    const sockets: FakeSocket[] = [];
    const stream = new LiveStream({
      url: () => "/s",
      onMessage: () => undefined,
      socketFactory: (url) => {
        const s = new FakeSocket(url);
        sockets.push(s);
        return s;
      },
      minDelayMs: 100,
      maxDelayMs: 1600,
    }).start();
    const times: number[] = [];
    let t = 0;
    for (let k = 0; k < 6; k++) {
      const before = sockets.length;
      sockets[sockets.length - 1].drop();
      while (sockets.length === before) {
        vi.advanceTimersByTime(10);
        t += 10;
      }
      times.push(t);
      t = 0;
    }
    // delays ~100, 200, 400, 800, 1600, 1600 with +-25 % jitter
    expect(times[0]).toBeLessThanOrEqual(130);
    expect(times[3]).toBeGreaterThanOrEqual(600);
    expect(times[5]).toBeLessThanOrEqual(2010);
    sockets[sockets.length - 1].open();
    sockets[sockets.length - 1].drop();
    const before = sockets.length;
    vi.advanceTimersByTime(130);
    expect(sockets.length).toBe(before + 1);
    stream.close();
  });

  it("ignores malformed frames", () => {
    const got: unknown[] = [];
    let sock: FakeSocket | null = null;
    const stream = new LiveStream({
      url: () => "/s",
      onMessage: (m) => got.push(m),
      socketFactory: (url) => (sock = new FakeSocket(url)),
    }).start();
    sock!.onmessage?.({ data: "{not json" });
    sock!.onmessage?.({ data: JSON.stringify({ type: "log", experiment_id: 1, lines: ["x"] }) });
    expect(got).toHaveLength(1);
    stream.close();
  });
});

describe("MetricStore", () => {
  it("resumes from the oldest per-series newest step", () => {
    const store = new MetricStore(100);
    store.loadHistory({ series: { a: { step: [1, 2, 3], value: [1, 2, 3] }, b: { step: [1, 2], value: [1, 2] } } });
    expect(store.sinceStep()).toBe(2);
    expect(new MetricStore(100).sinceStep()).toBeNull();
  });

  it("merges a zoom response and keeps live points", () => {
    const store = new MetricStore(100);
    store.loadHistory({ series: { a: { step: [0, 100, 200], value: [0, 1, 2] } } });
    store.ingest({ type: "metrics", experiment_id: 1, step: [300], series: { a: [3] } });
    store.mergeZoom({ series: { a: { step: [0, 50, 100], value: [0, 0.5, 1] } } }, 0, 100);
    expect(store.get("a")).toEqual({ step: [0, 50, 100, 200, 300], value: [0, 0.5, 1, 2, 3] });
  });
});

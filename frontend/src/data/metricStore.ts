/**
 * All metric series of one experiment in the browser, fed by a REST history load, websocket
 * messages (backlog + live) and zoom fetches. Knows where to resume a dropped stream.
 */

import type { MetricsMessage, MetricsResponse } from "../api/types";
import { BoundedSeries, lastStep, type Series } from "./series";

export class MetricStore {
  private readonly series = new Map<string, BoundedSeries>();
  /** Bumped on every change so views can skip redraws when nothing happened. */
  version = 0;

  constructor(readonly capacity = 20_000) {}

  names(): string[] {
    return [...this.series.keys()].sort();
  }

  get(name: string): Series {
    return this.series.get(name)?.data ?? { step: [], value: [] };
  }

  private slot(name: string): BoundedSeries {
    let s = this.series.get(name);
    if (!s) {
      s = new BoundedSeries(this.capacity);
      this.series.set(name, s);
    }
    return s;
  }

  /** Replace everything with a (downsampled) history from GET .../metrics. */
  loadHistory(resp: MetricsResponse): void {
    for (const [name, cols] of Object.entries(resp.series)) this.slot(name).reset(cols);
    this.version++;
  }

  /**
   * Add a websocket metrics message. Points at or before a series' newest step are duplicates
   * (the backlog after a reconnect overlaps what we hold) and are dropped. Returns the names of
   * the series that received points.
   */
  ingest(msg: MetricsMessage): string[] {
    const changed: string[] = [];
    for (const [name, values] of Object.entries(msg.series)) {
      if (this.slot(name).append(msg.step, values) > 0) changed.push(name);
    }
    if (changed.length) this.version++;
    return changed;
  }

  /** Swap in full-resolution points of a zoomed step range [lo, hi]. */
  mergeZoom(resp: MetricsResponse, lo: number, hi: number): void {
    for (const [name, cols] of Object.entries(resp.series)) this.slot(name).mergeRange(cols, lo, hi);
    this.version++;
  }

  /**
   * The `since_step` to (re)connect with: the oldest of the per-series newest steps, so no series
   * misses a point; the overlap with the others is dropped by `ingest`. null when empty.
   */
  sinceStep(): number | null {
    let min = Infinity;
    for (const s of this.series.values()) {
      if (s.length) min = Math.min(min, lastStep(s.data));
    }
    return Number.isFinite(min) ? min : null;
  }

  /** Total points held (for the memory bound check). */
  size(): number {
    let n = 0;
    for (const s of this.series.values()) n += s.length;
    return n;
  }
}

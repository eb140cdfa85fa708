/**
 * Everything live about one experiment: its metric history (downsampled by the server), the
 * websocket that continues it (resuming from the last step held after a drop), and zoom
 * fetches at full resolution. Pages subscribe to the callbacks they need.
 */

import { MetricStore } from "../data/metricStore";
import { LiveStream, type SocketFactory } from "./stream";
import { api, wsUrl } from "./client";
import type { Checkpoint, Evaluation, Experiment, StatusMessage, StreamMessage } from "./types";

export interface FeedHandlers {
  onMetrics?: (changed: string[]) => void;
  /** The experiment's full state (on connect) */
  onExperiment?: (exp: Experiment) => void;
  /** A lifecycle transition while connected. */
  onStatus?: (msg: StatusMessage) => void;
  onCheckpoint?: (c: Checkpoint) => void;
  /** `replace`: these are the recent lines the server sends after each (re)connect. */
  onLog?: (lines: string[], replace: boolean) => void;
  onState?: (online: boolean) => void;
  /** An evaluation of this experiment changed (null: deleted). */
  onEvaluation?: (id: number, evaluation: Evaluation | null) => void;
}

/** Points per series the first history load asks for (the server min/max-downsamples). */
export const HISTORY_POINTS = 2000;

export class ExperimentFeed {
  readonly store = new MetricStore(20_000);
  private stream: LiveStream | null = null;
  private closed = false;
  /** Set by the backlog's closing status: the log message right after it replaces, not appends. */
  private backlogLogNext = false;

  constructor(
    readonly id: number,
    private readonly names: string[],
    private readonly handlers: FeedHandlers,
    private readonly socketFactory?: SocketFactory,
  ) {}

  /**
   * Load the history, then stream. If the history cannot be loaded (service briefly away),
   * the stream starts anyway: its backlog from the first step fills the store instead.
   */
  async start(): Promise<void> {
    try {
      const history = await api.metrics(this.id, this.names, HISTORY_POINTS);
      if (this.closed) return;
      this.store.loadHistory(history);
      this.handlers.onMetrics?.(Object.keys(history.series));
    } catch {
      if (this.closed) return;
    }
    this.stream = new LiveStream({
      url: () => {
        const since = this.store.sinceStep();
        return wsUrl(`/experiments/${this.id}/stream`, { since_step: since ?? -1 });
      },
      onMessage: (m) => this.dispatch(m),
      onState: (online) => this.handlers.onState?.(online),
      socketFactory: this.socketFactory,
    }).start();
  }

  private dispatch(m: StreamMessage): void {
    const backlogLog = this.backlogLogNext;
    this.backlogLogNext = false;
    switch (m.type) {
      case "metrics": {
        const changed = this.store.ingest(m);
        if (changed.length) this.handlers.onMetrics?.(changed);
        break;
      }
      case "experiment":
        this.handlers.onExperiment?.(m.experiment);
        break;
      case "status":
        if (m.experiment) {
          this.backlogLogNext = true;
          this.handlers.onExperiment?.(m.experiment);
        } else this.handlers.onStatus?.(m);
        break;
      case "checkpoint":
        this.handlers.onCheckpoint?.(m.checkpoint);
        break;
      case "log":
        this.handlers.onLog?.(m.lines, backlogLog);
        break;
      case "evaluation":
        this.handlers.onEvaluation?.(m.evaluation_id, m.evaluation);
        break;
      case "deleted":
        break;
    }
  }

  /** The (downsampled) history of more series, for a chart added after the start. */
  async loadHistory(names: string[]): Promise<void> {
    const resp = await api.metrics(this.id, names, HISTORY_POINTS);
    if (this.closed) return;
    this.store.loadHistory(resp);
    this.handlers.onMetrics?.(Object.keys(resp.series));
  }

  /** Fetch [lo, hi] (env steps) at full resolution and merge it into the held series. */
  async zoom(lo: number, hi: number, names: string[]): Promise<void> {
    const resp = await api.metrics(this.id, names, HISTORY_POINTS, lo, hi);
    if (this.closed) return;
    this.store.mergeZoom(resp, lo, hi);
    this.handlers.onMetrics?.(Object.keys(resp.series));
  }

  close(): void {
    this.closed = true;
    this.stream?.close();
  }
}

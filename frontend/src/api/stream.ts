/**
 * A websocket that reconnects by itself with exponential backoff. The URL is rebuilt on every
 * attempt, so a caller resumes from the last step it holds (`since_step`). Connection state is
 * reported so the page can show "offline".
 */

import { streamProtocols } from "./client";
import type { StreamMessage } from "./types";

export interface SocketLike {
  /** 0 while connecting (WebSocket.CONNECTING). */
  readonly readyState?: number;
  onopen: ((ev: unknown) => void) | null;
  onclose: ((ev: unknown) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  close(): void;
}

export type SocketFactory = (url: string) => SocketLike;

export interface StreamOptions {
  url: () => string;
  onMessage: (msg: StreamMessage) => void;
  onState?: (online: boolean) => void;
  minDelayMs?: number;
  maxDelayMs?: number;
  socketFactory?: SocketFactory;
}

// The API token (if any) travels as a subprotocol, never in the URL.
const browserSocket: SocketFactory = (url) =>
  new WebSocket(url, streamProtocols()) as unknown as SocketLike;

export class LiveStream {
  private socket: SocketLike | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private attempt = 0;
  private closed = false;
  online = false;

  constructor(private readonly opts: StreamOptions) {}

  start(): this {
    this.connect();
    return this;
  }

  close(): void {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    const s = this.socket;
    this.socket = null;
    if (s) {
      s.onclose = null;
      s.onmessage = null;
      // Closing a socket that is still connecting makes the browser log an error: wait for open.
      if (s.readyState === 0) s.onopen = () => s.close();
      else s.close();
    }
    this.setOnline(false);
  }

  private connect(): void {
    if (this.closed) return;
    const factory = this.opts.socketFactory ?? browserSocket;
    const s = factory(this.opts.url());
    this.socket = s;
    s.onopen = () => {
      this.attempt = 0;
      this.setOnline(true);
    };
    s.onmessage = (ev) => {
      if (typeof ev.data !== "string") return;
      let msg: StreamMessage;
      try {
        msg = JSON.parse(ev.data) as StreamMessage;
      } catch {
        return;
      }
      this.opts.onMessage(msg);
    };
    s.onerror = () => {
      // onclose follows; reconnecting happens there.
    };
    s.onclose = () => {
      if (this.socket !== s) return;
      this.socket = null;
      this.setOnline(false);
      this.schedule();
    };
  }

  private schedule(): void {
    if (this.closed) return;
    const min = this.opts.minDelayMs ?? 500;
    const max = this.opts.maxDelayMs ?? 10_000;
    const delay = Math.min(max, min * 2 ** this.attempt) * (0.75 + Math.random() * 0.5);
    this.attempt++;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.connect();
    }, delay);
  }

  private setOnline(online: boolean): void {
    if (online === this.online) return;
    this.online = online;
    this.opts.onState?.(online);
  }
}

/** Number, duration and ETA formatting for tables and tooltips. */

export function fmtNumber(v: number | null | undefined, digits = 3): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(2);
  if (Number.isInteger(v)) return v.toLocaleString("en-US");
  return v.toLocaleString("en-US", { maximumSignificantDigits: digits + 1 });
}

export function fmtSteps(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  if (v >= 1e9) return `${(v / 1e9).toFixed(2)}G`;
  if (v >= 1e6) return `${(v / 1e6).toFixed(2)}M`;
  if (v >= 1e4) return `${(v / 1e3).toFixed(1)}k`;
  return String(Math.round(v));
}

export function fmtDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds) || seconds < 0) return "–";
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  return `${h}h ${m % 60}m`;
}

export function fmtBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}

/** Parse an API timestamp; naive ISO strings from the server are UTC. */
export function parseTime(iso: string | null | undefined): number | null {
  if (!iso) return null;
  const hasZone = /[zZ]|[+-]\d\d:?\d\d$/.test(iso);
  const t = Date.parse(hasZone ? iso : `${iso}Z`);
  return Number.isNaN(t) ? null : t;
}

export function fmtTime(iso: string | null | undefined): string {
  const t = parseTime(iso);
  if (t === null) return "–";
  const d = new Date(t);
  return d.toLocaleString(undefined, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

/** Seconds between start and end (or now while running). */
export function elapsedSeconds(startedAt: string | null, finishedAt: string | null, now = Date.now()): number | null {
  const a = parseTime(startedAt);
  if (a === null) return null;
  const b = parseTime(finishedAt) ?? now;
  return Math.max(0, (b - a) / 1000);
}

/** Remaining seconds at a constant rate of progress; null when unknown. */
export function etaSeconds(progress: number, elapsed: number | null): number | null {
  if (elapsed === null || !(progress > 0) || progress >= 1) return null;
  return (elapsed * (1 - progress)) / progress;
}

/** Clock time only (today's events, checkpoint lists). */
export function fmtClock(iso: string | null | undefined): string {
  const t = parseTime(iso);
  if (t === null) return "–";
  return new Date(t).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

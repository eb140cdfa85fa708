/** REST calls to /api/v1. Errors come back as ApiError carrying the server's field errors. */

import type {
  Checkpoint,
  ErrorBody,
  Evaluation,
  EvaluationDetail,
  EvaluationRequest,
  Experiment,
  ExperimentEvent,
  ExperimentPage,
  FieldError,
  MetricSummary,
  MetricsResponse,
  PPOConfig,
  ReferenceList,
  ResolvedConfig,
  StopCriteria,
} from "./types";
import type { Study, StudyBest, StudyCreate, StudyDetail, TrialOf } from "./studyTypes";
import type { SweepCreate, SweepDetail, SweepMetrics, Sweep } from "./sweepTypes";

export const API = "/api/v1";
const TOKEN_KEY = "rollout.token";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly fields: FieldError[] = [],
  ) {
    super(message);
  }
}

export function apiToken(): string | null {
  try {
    return localStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

export function setApiToken(token: string | null): void {
  if (token) localStorage.setItem(TOKEN_KEY, token);
  else localStorage.removeItem(TOKEN_KEY);
}

async function request<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json" };
  const token = apiToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let resp: Response;
  try {
    resp = await fetch(`${API}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError(0, "unreachable", `The service is unreachable (${String(e)})`);
  }
  if (resp.status === 204) return undefined as T;
  const text = await resp.text();
  let data: unknown = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (resp.status === 401) window.dispatchEvent(new CustomEvent("rollout:unauthorized"));
  if (!resp.ok) {
    const err = (data as ErrorBody | null)?.error;
    throw new ApiError(
      resp.status,
      err?.code ?? `http_${resp.status}`,
      err?.message ?? (text.slice(0, 200) || resp.statusText),
      err?.fields ?? [],
    );
  }
  return data as T;
}

function query(params: Record<string, string | number | null | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== "") q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : "";
}

export interface ListFilter {
  status?: string;
  tag?: string;
  /** Part of a tag, ignoring case. */
  tag_contains?: string;
  name?: string;
  limit?: number;
  cursor?: string | null;
}

export const api = {
  list: (f: ListFilter = {}) =>
    request<ExperimentPage>("GET", `/experiments${query({ ...f, cursor: f.cursor ?? undefined })}`),
  get: (id: number) => request<Experiment>("GET", `/experiments/${id}`),
  /** `parentId`: the experiment this one was forked from (kept as its parent, "from #N");
   * `evaluationEvery`: a video of every N-th checkpoint as it trains (0: none). */
  create: (name: string, config: PPOConfig, tags: string[], parentId: number | null = null, evaluationEvery = 0) =>
    request<Experiment>("POST", "/experiments", {
      name,
      config,
      tags,
      evaluation_every: evaluationEvery,
      ...(parentId === null ? {} : { parent_id: parentId }),
    }),
  resolvePreset: (config: PPOConfig) => request<ResolvedConfig>("POST", "/presets/resolve", { config }),
  stop: (id: number) => request<Experiment>("POST", `/experiments/${id}/stop`),
  /** Rename, retag (replaces the tags) or annotate; fields left out stay as they are. */
  update: (id: number, patch: { name?: string; tags?: string[]; notes?: string | null }) =>
    request<Experiment>("PATCH", `/experiments/${id}`, patch),
  remove: (id: number) => request<void>("DELETE", `/experiments/${id}`),
  events: (id: number) => request<ExperimentEvent[]>("GET", `/experiments/${id}/events`),
  checkpoints: (id: number) => request<Checkpoint[]>("GET", `/experiments/${id}/checkpoints`),
  /** `stop` replaces those stop criteria of the source (null clears one); omitted: kept. */
  resume: (id: number, stop?: StopCriteria) =>
    request<Experiment>("POST", `/experiments/${id}/resume`, stop ? { stop } : undefined),
  metricNames: (id: number) => request<{ names: string[] }>("GET", `/experiments/${id}/metrics/names`),
  /** Last, min and max of `names` for each of `ids` (the runs table's metric columns). */
  metricSummaries: (ids: number[], names: string[]) =>
    request<{ summaries: Record<string, Record<string, MetricSummary>> }>("GET", `/metric-summaries${query({ ids: ids.join(","), names: names.join(",") })}`),
  metrics: (id: number, names: string[], maxPoints: number | undefined, stepMin?: number, stepMax?: number) =>
    request<MetricsResponse>(
      "GET",
      `/experiments/${id}/metrics${query({
        names: names.join(","),
        max_points: maxPoints,
        step_min: stepMin === undefined ? undefined : Math.floor(stepMin),
        step_max: stepMax === undefined ? undefined : Math.ceil(stepMax),
      })}`,
    ),
  evaluate: (id: number, body: EvaluationRequest) =>
    request<EvaluationDetail>("POST", `/experiments/${id}/evaluations`, body),
  evaluations: (id: number) => request<Evaluation[]>("GET", `/experiments/${id}/evaluations`),
  evaluation: (eid: number) => request<EvaluationDetail>("GET", `/evaluations/${eid}`),
  deleteEvaluation: (eid: number) => request<void>("DELETE", `/evaluations/${eid}`),
  sweeps: () => request<{ items: Sweep[] }>("GET", "/sweeps"),
  createSweep: (body: SweepCreate) => request<SweepDetail>("POST", "/sweeps", body),
  sweep: (id: number) => request<SweepDetail>("GET", `/sweeps/${id}`),
  sweepMetrics: (id: number, names: string[], points: number) =>
    request<SweepMetrics>("GET", `/sweeps/${id}/metrics${query({ names: names.join(","), points })}`),
  stopSweep: (id: number) => request<SweepDetail>("POST", `/sweeps/${id}/stop`),
  deleteSweep: (id: number) => request<void>("DELETE", `/sweeps/${id}`),
  studies: () => request<{ items: Study[] }>("GET", "/studies"),
  createStudy: (body: StudyCreate) => request<StudyDetail>("POST", "/studies", body),
  study: (id: number) => request<StudyDetail>("GET", `/studies/${id}`),
  /** The best complete trial and its resolved config (404 while none is complete). */
  studyBest: (id: number) => request<StudyBest>("GET", `/studies/${id}/best`),
  trialOf: (experimentId: number) => request<TrialOf | null>("GET", `/experiments/${experimentId}/trial`),
  stopStudy: (id: number) => request<StudyDetail>("POST", `/studies/${id}/stop`),
  deleteStudy: (id: number) => request<void>("DELETE", `/studies/${id}`),
  references: (envId: string) => request<ReferenceList>("GET", `/references${query({ env_id: envId })}`),
};

export function checkpointDownloadUrl(id: number, cid: number | "best" | "latest"): string {
  return `${API}/experiments/${id}/checkpoints/${cid}/download`;
}

/** ws:// URL for a stream path under /api/v1. Never carries the token: servers log URLs. */
export function wsUrl(path: string, params: Record<string, string | number | null | undefined> = {}): string {
  const proto = location.protocol === "https:" ? "wss" : "ws";
  return `${proto}://${location.host}${API}${path}${query(params)}`;
}

/**
 * Websocket subprotocols to offer: "rollout", plus the API token as
 * "rollout.token.<base64url>" when one is configured (browsers cannot set an Authorization
 * header on a websocket; the service answers "rollout" and never echoes the token back).
 */
export function streamProtocols(token: string | null = apiToken()): string[] {
  if (!token) return ["rollout"];
  const bytes = new TextEncoder().encode(token);
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  const encoded = btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  return ["rollout", `rollout.token.${encoded}`];
}

/**
 * Download a checkpoint. Plain links stream straight to disk; with an API token the request
 * needs its Authorization header, so the archive is fetched and handed over as a blob.
 */
/** Hand `text` to the browser as a file download. */
export function saveText(text: string, filename: string, type: string): void {
  const blobUrl = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement("a");
  a.href = blobUrl;
  a.download = filename;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(blobUrl), 60_000);
}

export async function downloadWithToken(url: string, filename: string): Promise<void> {
  const token = apiToken();
  const resp = await fetch(url, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
  if (!resp.ok) throw new ApiError(resp.status, `http_${resp.status}`, `download failed (${resp.status})`);
  const blobUrl = URL.createObjectURL(await resp.blob());
  const a = document.createElement("a");
  a.href = blobUrl;
  a.download = filename;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(blobUrl), 60_000);
}

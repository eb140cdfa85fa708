/** Which metrics the experiment page plots, grouped into charts. Names are the trainer's. */

export interface ChartDef {
  title: string;
  lines: { name: string; label: string }[];
  /** Names of the band's upper and lower edge (drawn shaded around the first line). */
  band?: [string, string];
}

export const CHARTS: ChartDef[] = [
  {
    title: "Episode return",
    lines: [
      { name: "episode_return_mean", label: "mean" },
      { name: "episode_return_max", label: "max" },
      { name: "episode_return_min", label: "min" },
    ],
    band: ["episode_return_max", "episode_return_min"],
  },
  { title: "Episode length", lines: [{ name: "episode_len_mean", label: "mean length" }] },
  { title: "Policy loss", lines: [{ name: "policy_loss", label: "policy loss" }] },
  { title: "Value loss", lines: [{ name: "vf_loss", label: "value loss" }] },
  { title: "Entropy", lines: [{ name: "entropy", label: "entropy" }] },
  {
    title: "KL divergence",
    lines: [
      { name: "kl", label: "KL" },
      { name: "kl_coeff", label: "KL coeff" },
    ],
  },
  { title: "Clip fraction", lines: [{ name: "clip_fraction", label: "clip fraction" }] },
  { title: "Explained variance", lines: [{ name: "explained_variance", label: "explained variance" }] },
  { title: "Throughput", lines: [{ name: "env_steps_per_s", label: "env steps/s" }] },
  {
    title: "Time per phase",
    lines: [
      { name: "time_sample_s", label: "sample" },
      { name: "time_gae_s", label: "GAE" },
      { name: "time_sgd_s", label: "SGD" },
      { name: "time_weight_sync_s", label: "weight sync" },
      { name: "time_iteration_s", label: "iteration" },
    ],
  },
  {
    title: "CPU",
    lines: [
      { name: "system/cpu_percent", label: "trainer % (100 = a core)" },
      { name: "system/node_cpu_percent", label: "machine %" },
    ],
  },
  {
    title: "Memory",
    lines: [
      { name: "system/rss_mb", label: "trainer MB" },
      { name: "system/gpu_memory_mb", label: "GPU MB" },
    ],
  },
];

/** Every metric any chart needs, plus wall time for the time axis. */
export function allMetricNames(): string[] {
  const names = new Set<string>(["time_s"]);
  for (const c of CHARTS) for (const l of c.lines) names.add(l.name);
  return [...names];
}

/** Metrics on the compare page (one chart each, one line per experiment), with titles. */
export const COMPARE_METRICS: [name: string, title: string][] = [
  ["episode_return_mean", "Episode return (mean)"],
  ["episode_len_mean", "Episode length (mean)"],
  ["policy_loss", "Policy loss"],
  ["vf_loss", "Value loss"],
  ["entropy", "Entropy"],
  ["kl", "KL divergence"],
  ["explained_variance", "Explained variance"],
  ["env_steps_per_s", "Env steps/s"],
];

/**
 * "Did you mean" for a config key the form has no input for (a pasted file's `learning_rate`).
 * PPOConfig rejects unknown keys, so the form shows each one with its nearest known field
 * instead of sending it silently and failing every submit.
 */

/** Names other PPO libraries use (SB3, CleanRL, RLlib) for PPOConfig's fields; the service
 * says the same (trainer/field_names.py, kept alike by a test). */
const ALIASES: Record<string, string> = {
  learning_rate: "lr",
  clip_range: "clip_param",
  clip_coef: "clip_param",
  clip_range_vf: "vf_clip_param",
  vf_coef: "vf_loss_coeff",
  ent_coef: "entropy_coeff",
  n_epochs: "num_epochs",
  update_epochs: "num_epochs",
  batch_size: "minibatch_size",
  minibatch: "minibatch_size",
  n_envs: "num_envs_per_env_runner",
  num_envs: "num_envs_per_env_runner",
  max_grad_norm: "grad_clip",
  norm_adv: "normalize_advantages",
  lambda: "gae_lambda",
  env: "env_id",
  total_timesteps: "stop.env_steps",
  steps: "stop.env_steps",
  target_kl: "kl_target",
};

/** Levenshtein distance (small strings: a plain dynamic programme). */
export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row.push(Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1)));
    }
    prev = row;
  }
  return prev[b.length];
}

/** The known field `path` most likely meant, or null when none is close. */
export function suggestField(path: string, known: readonly string[]): string | null {
  const leaf = path.slice(path.lastIndexOf(".") + 1).toLowerCase();
  const alias = ALIASES[leaf];
  if (alias && known.includes(alias)) return alias;
  let best: string | null = null;
  let bestScore = Infinity;
  for (const k of known) {
    const kLeaf = k.slice(k.lastIndexOf(".") + 1);
    const score = Math.min(editDistance(path.toLowerCase(), k), editDistance(leaf, kLeaf));
    if (score < bestScore) [best, bestScore] = [k, score];
  }
  // At most a third of the name may differ ("lr_rate" -> no; "entropy_coef" -> entropy_coeff).
  return best !== null && bestScore <= Math.max(1, Math.floor(leaf.length / 3)) ? best : null;
}

/** Remove the dotted `path` from `obj`, and any section it leaves empty. */
export function deletePath(obj: Record<string, unknown>, path: string): void {
  const [head, ...rest] = path.split(".");
  if (!rest.length) {
    delete obj[head];
    return;
  }
  const child = obj[head];
  if (child === null || typeof child !== "object" || Array.isArray(child)) return;
  deletePath(child as Record<string, unknown>, rest.join("."));
  if (!Object.keys(child).length) delete obj[head];
}

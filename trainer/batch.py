"""The learner connector: episode chunks -> one flat train batch of tensors.

Values and GAE are the Learner's job; EnvRunners only act (trainer/env_runner.py). Steps:
concatenate the T+1 observations of all K chunks, run ONE batched value forward pass over those
B+K rows (which yields every V(s_t) and each chunk's bootstrap value V(s_T)), compute GAE per
chunk, keep the B real timesteps, standardise the advantages over those real timesteps only.

Observations are copied once on the host: the chunks are views into the EnvRunner's sample
buffers, and their rows are concatenated straight into a staging buffer the Learner reuses
(pinned for a GPU Learner, then one asynchronous upload); the real rows are picked on the device.

Axes: K chunks, B = sum(T_k) real timesteps, D = dist_inputs width.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from trainer import gae
from trainer.devices import HostStaging
from trainer.episode import EpisodeChunk


@dataclass(frozen=True)
class TrainBatch:
    """Everything the PPO loss needs, one row per real timestep, already on the Learner device."""

    obs: torch.Tensor  # [B, *obs_shape] as sampled (uint8 images stay uint8)
    actions: torch.Tensor  # [B, ...] as sampled
    logp: torch.Tensor  # [B] log-prob under the sampling policy
    dist_inputs: torch.Tensor  # [B, D] of the sampling policy
    advantages: torch.Tensor  # [B], standardised when asked
    value_targets: torch.Tensor  # [B]
    values: torch.Tensor  # [B] V(s_t) before the update (for value clipping, explained variance)

    def __len__(self) -> int:
        return len(self.logp)

    def split(self, perm: torch.Tensor, sizes: list[int]) -> list[TrainBatch]:
        """Minibatches of `sizes` rows taken in the order of `perm` (a CPU index tensor with at
        least sum(sizes) rows), gathered on the batch's device."""
        index = perm[: sum(sizes)].to(self.logp.device)
        columns = [getattr(self, f.name) for f in dataclasses.fields(self)]  # no deep copy
        return [
            TrainBatch(*(t.index_select(0, idx) for t in columns)) for idx in index.split(sizes)
        ]

    def standardized(self) -> TrainBatch:
        """The batch with its advantages standardised as SB3's and CleanRL's PPO do per
        minibatch: (A - mean) / (std + 1e-8), torch's unbiased std; one row is left as is
        (SB3's guard, its issue #325)."""
        adv = self.advantages
        if len(adv) < 2:
            return self
        return dataclasses.replace(self, advantages=(adv - adv.mean()) / (adv.std() + 1e-8))


def build_train_batch(
    chunks: Sequence[EpisodeChunk],
    value_fn: Callable[[torch.Tensor], torch.Tensor],
    *,
    gamma: float,
    lam: float,
    normalize_advantages: bool,
    device: torch.device | str = "cpu",
    value_rows_per_pass: int | None = None,
    staging: HostStaging | None = None,
) -> TrainBatch:
    """Build the train batch for `chunks`; `value_fn` maps obs [N, *obs] -> values [N].

    value_rows_per_pass bounds the rows of one value forward pass (memory, for image batches);
    None runs a single pass over all B+K rows. `staging` is a reused host buffer for the
    observations (a fresh array without one).
    """
    if not chunks:
        raise ValueError("cannot build a train batch from zero episode chunks")
    lengths = np.fromiter((len(c) for c in chunks), dtype=np.int64, count=len(chunks))  # [K]
    terminated = np.fromiter((c.terminated for c in chunks), dtype=bool, count=len(chunks))
    staging = staging or HostStaging(torch.device(device), reuse=False)
    first = chunks[0].obs
    host = staging.take(int(lengths.sum()) + len(chunks), first.shape[1:], first.dtype)
    np.concatenate([c.obs for c in chunks], out=host)  # [B+K, *obs]
    obs_all = staging.upload(host)
    with torch.no_grad():
        if value_rows_per_pass is None:
            values_all = value_fn(obs_all)  # [B+K]
        else:
            values_all = torch.cat([value_fn(o) for o in obs_all.split(value_rows_per_pass)])
    rewards = np.concatenate([c.rewards for c in chunks])  # [B]
    values_np = values_all.float().cpu().numpy()
    advantages, targets = gae.compute_gae(values_np, rewards, lengths, terminated, gamma, lam)
    if normalize_advantages and len(advantages) > 1:
        # Over real timesteps only (RLlib also counted its phantom rows); 1e-8 as in SB3.
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    real, _ = gae.chunk_rows(lengths)
    real_t = torch.from_numpy(real).to(device)

    def cat(name: str) -> torch.Tensor:
        return torch.from_numpy(np.concatenate([getattr(c, name) for c in chunks])).to(device)

    actions = cat("actions")
    if actions.is_floating_point():
        actions = actions.float()  # Box actions: float32 like the module's outputs
    return TrainBatch(
        obs=obs_all.index_select(0, real_t),
        actions=actions,
        logp=cat("logp").float(),
        dist_inputs=cat("dist_inputs").float(),
        advantages=torch.from_numpy(advantages).to(device),
        value_targets=torch.from_numpy(targets).to(device),
        values=values_all.index_select(0, real_t).float(),
    )


def split_chunk(chunk: EpisodeChunk, k: int) -> tuple[EpisodeChunk, EpisodeChunk]:
    """Steps [0, k) and [k, T) of a chunk. The head ends "cut" (it bootstraps from V(s_k), which
    its last observation row provides); the tail keeps the chunk's ending and id."""
    if not 0 < k < len(chunk):
        raise ValueError(f"split point {k} outside (0, {len(chunk)})")
    head = dataclasses.replace(
        chunk,
        obs=chunk.obs[: k + 1],
        actions=chunk.actions[:k],
        rewards=chunk.rewards[:k],
        logp=chunk.logp[:k],
        dist_inputs=chunk.dist_inputs[:k],
        terminated=False,
        truncated=False,
    )
    tail = dataclasses.replace(
        chunk,
        t_started=chunk.t_started + k,
        obs=chunk.obs[k:],
        actions=chunk.actions[k:],
        rewards=chunk.rewards[k:],
        logp=chunk.logp[k:],
        dist_inputs=chunk.dist_inputs[k:],
    )
    return head, tail


# Whole-chunk shards may exceed their equal share by this factor before chunks get split.
SHARD_IMBALANCE_TOLERANCE = 1.1


def shard_chunks(chunks: Sequence[EpisodeChunk], num_shards: int) -> list[list[EpisodeChunk]]:
    """Split chunks into `num_shards` lists balanced by step count.

    Whole chunks first (longest first, each to the currently smallest shard), so GAE sees every
    chunk as sampled. Only when that leaves a shard empty (a DDP rank could not take its gradient
    steps) or more than 10 % above its share (every rank would wait for it), chunks are split to
    hit the shares exactly, as RLlib's ShardEpisodesIterator does; a split head bootstraps from
    V(s_k) like a rollout cut (a small truncation of its lambda-return).
    """
    total = sum(len(c) for c in chunks)
    if total < num_shards:
        raise ValueError(f"{total} env steps cannot feed {num_shards} learners")
    ordered = sorted(chunks, key=len, reverse=True)
    whole = _fill_shards(ordered, [0] * num_shards, split=False)
    sizes = [sum(len(c) for c in s) for s in whole]
    if min(sizes) > 0 and max(sizes) <= SHARD_IMBALANCE_TOLERANCE * total / num_shards:
        return whole
    # Shard i's share: total // num_shards, the first (total % num_shards) shards one more.
    targets = [total // num_shards + (i < total % num_shards) for i in range(num_shards)]
    return _fill_shards(ordered, targets, split=True)


def _fill_shards(
    ordered: list[EpisodeChunk], targets: list[int], *, split: bool
) -> list[list[EpisodeChunk]]:
    """Greedy: each chunk goes to the shard furthest below its target (all targets 0: the
    smallest shard). With `split`, a chunk that overflows that shard's target is cut to fit."""
    shards: list[list[EpisodeChunk]] = [[] for _ in targets]
    sizes = [0] * len(targets)
    queue = list(ordered)
    while queue:
        chunk = queue.pop(0)
        i = min(range(len(targets)), key=lambda j: sizes[j] - targets[j])
        room = targets[i] - sizes[i]
        if split and len(chunk) > room > 0:
            chunk, rest = split_chunk(chunk, room)
            queue.insert(0, rest)
        shards[i].append(chunk)
        sizes[i] += len(chunk)
    return shards

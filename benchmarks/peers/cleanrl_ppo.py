"""CleanRL's single-file PPO (cleanrl/ppo.py) on CartPole-v1 with its default arguments.

Follows vwxyzjn/cleanrl, cleanrl/ppo.py (docs: https://docs.cleanrl.dev/rl-algorithms/ppo/#ppopy),
written out here because the ``cleanrl`` package on PyPI (0.4.8) predates gymnasium. Defaults
kept: 4 envs x 128 steps, 4 minibatches x 4 epochs, lr 2.5e-4 annealed to 0 over 500k steps,
gamma 0.99, lambda 0.95, advantage normalisation per minibatch, clip 0.2 with clipped value loss,
ent 0.01, vf 0.5, grad norm 0.5, Adam eps 1e-5, orthogonal init, torch's default thread count.
Left out: tensorboard/wandb logging and video capture. CleanRL targets gymnasium 0.29, whose
vector envs reset in the same step (truncation counted as done, no bootstrap): the SAME_STEP
autoreset mode of gymnasium 1.x reproduces that. Episode returns are summed here rather than
read from RecordEpisodeStatistics so that every peer reports them the same way.
"""

from __future__ import annotations

import argparse
import random

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from episode_report import EpisodeReport
from torch.distributions.categorical import Categorical


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """CleanRL's separate 64x64 tanh actor and critic."""

    def __init__(self, obs_dim: int, n_actions: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        self.actor = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, n_actions), std=0.01),
        )

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def get_action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None):
        probs = Categorical(logits=self.actor(x))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


def make_env(env_id: str):
    def thunk() -> gym.Env:
        return gym.wrappers.RecordEpisodeStatistics(gym.make(env_id))

    return thunk


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--target", type=float, default=475.0)
    p.add_argument("--env-id", default="CartPole-v1")
    p.add_argument("--total-timesteps", type=int, default=500_000)
    p.add_argument("--learning-rate", type=float, default=2.5e-4)
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--num-steps", type=int, default=128)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--num-minibatches", type=int, default=4)
    p.add_argument("--update-epochs", type=int, default=4)
    p.add_argument("--clip-coef", type=float, default=0.2)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    args = p.parse_args()
    args.batch_size = args.num_envs * args.num_steps
    args.minibatch_size = args.batch_size // args.num_minibatches
    args.num_iterations = args.total_timesteps // args.batch_size
    return args


def compute_gae(args, rewards, values, dones, next_value, next_done):
    """CleanRL's reverse loop over [T, N] tensors."""
    advantages = torch.zeros_like(rewards)
    lastgaelam = 0
    for t in reversed(range(args.num_steps)):
        if t == args.num_steps - 1:
            nextnonterminal, nextvalues = 1.0 - next_done, next_value
        else:
            nextnonterminal, nextvalues = 1.0 - dones[t + 1], values[t + 1]
        delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
        advantages[t] = lastgaelam = (
            delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
        )
    return advantages, advantages + values


def update(args, agent, optimizer, b_obs, b_logprobs, b_actions, b_advantages, b_returns, b_values):
    """num_epochs x shuffled minibatches of the clipped surrogate, clipped value loss, entropy."""
    b_inds = np.arange(args.batch_size)
    for _epoch in range(args.update_epochs):
        np.random.shuffle(b_inds)
        for start in range(0, args.batch_size, args.minibatch_size):
            mb = b_inds[start : start + args.minibatch_size]
            _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                b_obs[mb], b_actions.long()[mb]
            )
            ratio = (newlogprob - b_logprobs[mb]).exp()
            mb_adv = b_advantages[mb]
            mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
            pg_loss = torch.max(
                -mb_adv * ratio,
                -mb_adv * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef),
            ).mean()
            newvalue = newvalue.view(-1)
            v_clipped = b_values[mb] + torch.clamp(
                newvalue - b_values[mb], -args.clip_coef, args.clip_coef
            )
            v_loss = (
                0.5
                * torch.max(
                    (newvalue - b_returns[mb]) ** 2, (v_clipped - b_returns[mb]) ** 2
                ).mean()
            )
            loss = pg_loss - args.ent_coef * entropy.mean() + v_loss * args.vf_coef
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
            optimizer.step()


def main() -> None:
    args = parse_args()
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    report = EpisodeReport(args.target)

    envs = gym.vector.SyncVectorEnv(
        [make_env(args.env_id) for _ in range(args.num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    obs_shape = envs.single_observation_space.shape
    agent = Agent(int(np.prod(obs_shape)), int(envs.single_action_space.n))
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    # [T, N, ...] rollout storage
    obs = torch.zeros((args.num_steps, args.num_envs, *obs_shape))
    actions = torch.zeros((args.num_steps, args.num_envs))
    logprobs = torch.zeros((args.num_steps, args.num_envs))
    rewards = torch.zeros((args.num_steps, args.num_envs))
    dones = torch.zeros((args.num_steps, args.num_envs))
    values = torch.zeros((args.num_steps, args.num_envs))

    global_step = 0
    episode_returns = np.zeros(args.num_envs)
    next_obs = torch.Tensor(envs.reset(seed=args.seed)[0])
    next_done = torch.zeros(args.num_envs)
    for iteration in range(1, args.num_iterations + 1):
        frac = 1.0 - (iteration - 1.0) / args.num_iterations
        optimizer.param_groups[0]["lr"] = frac * args.learning_rate
        for step in range(args.num_steps):
            global_step += args.num_envs
            obs[step], dones[step] = next_obs, next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step], logprobs[step] = action, logprob
            raw_obs, reward, terminations, truncations, _ = envs.step(action.cpu().numpy())
            done = np.logical_or(terminations, truncations)
            rewards[step] = torch.tensor(reward).view(-1)
            next_obs, next_done = torch.Tensor(raw_obs), torch.Tensor(done)
            episode_returns += reward
            for i in np.flatnonzero(done):
                report.episode(global_step, episode_returns[i])
                episode_returns[i] = 0.0
            if report.crossed:
                return

        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages, returns = compute_gae(args, rewards, values, dones, next_value, next_done)
        update(
            args,
            agent,
            optimizer,
            obs.reshape((-1, *obs_shape)),
            logprobs.reshape(-1),
            actions.reshape(-1),
            advantages.reshape(-1),
            returns.reshape(-1),
            values.reshape(-1),
        )


if __name__ == "__main__":
    main()

"""CleanRL's ppo_atari_envpool.py design on ale-py's AtariVectorEnv, for the Atari benchmark.

Follows vwxyzjn/cleanrl, cleanrl/ppo_atari_envpool.py (docs:
https://docs.cleanrl.dev/rl-algorithms/ppo/#ppo_atari_envpoolpy): one shared Nature CNN with a
policy and a value head, orthogonal init, Adam eps 1e-5, lr annealed linearly to 0 over
--total-timesteps, GAE, advantages normalised per minibatch, clipped surrogate AND clipped value
loss (both with --clip-coef), entropy bonus, global grad-norm clip. Written out here because
envpool has no wheel for current Pythons; ale-py's AtariVectorEnv does the same preprocessing
in C++ threads (84x84 grey, frame skip 4, max-pool, 4-frame stack, no-op starts, FIRE reset).

Differences, all to share Rollout's env settings: SAME_STEP autoreset (CleanRL's loop assumes
the reset observation comes with the `done` step, as envpool's gym API delivered it),
episodic_life off and no sticky actions, rewards clipped to [-1, 1] here rather than in the env
(so episode returns are the raw game score), and the run stops after --seconds.

Writes one JSON line per iteration to OUT/metrics.jsonl with the keys Rollout's metrics use
(iteration, env_steps, episodes, episode_return_mean over the last 100 episodes, time_s since
process start, and phase timers), so benchmarks/atari.py reads both the same way.

Defaults are CleanRL's ppo_atari_envpool.py arguments; benchmarks/atari.py passes CleanRL's
"Solve Pong in about 5 mins" settings (16 envs, 8 minibatches, 3 epochs, clip 0.2).
"""

from __future__ import annotations

import time

START = time.monotonic()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
from collections import deque  # noqa: E402
from pathlib import Path  # noqa: E402

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.optim as optim  # noqa: E402
from torch.distributions.categorical import Categorical  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env-id", default="ALE/Pong-v5")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--total-timesteps", type=int, default=10_000_000)
    p.add_argument("--seconds", type=float, default=300.0, help="stop after this wall time")
    p.add_argument("--stop-return", type=float, default=None, help="stop at this 100-ep mean")
    p.add_argument("--learning-rate", type=float, default=2.5e-4)
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--num-steps", type=int, default=128)
    p.add_argument("--num-threads", type=int, default=0, help="AtariVectorEnv threads")
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--num-minibatches", type=int, default=4)
    p.add_argument("--update-epochs", type=int, default=4)
    p.add_argument("--clip-coef", type=float, default=0.1)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--max-episode-frames", type=int, default=108_000)
    p.add_argument("--cuda", type=int, default=1, help="use the GPU when there is one")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    args.batch_size = args.num_envs * args.num_steps
    args.minibatch_size = args.batch_size // args.num_minibatches
    return args


def layer_init(layer: nn.Module, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Module:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """CleanRL's Atari agent: Nature CNN trunk shared by the actor and critic heads."""

    def __init__(self, n_actions: int) -> None:
        super().__init__()
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(4, 32, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.ReLU(),
        )
        self.actor = layer_init(nn.Linear(512, n_actions), std=0.01)
        self.critic = layer_init(nn.Linear(512, 1), std=1)

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(self.network(x / 255.0))

    def get_action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None):
        hidden = self.network(x / 255.0)
        probs = Categorical(logits=self.actor(hidden))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden)


def make_envs(args: argparse.Namespace) -> gym.vector.VectorEnv:
    import ale_py  # registers ALE/ ids

    del ale_py
    return gym.make_vec(
        args.env_id,
        num_envs=args.num_envs,
        vectorization_mode="vector_entry_point",
        num_threads=args.num_threads,
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
        repeat_action_probability=0.0,
        reward_clipping=False,
        episodic_life=False,
        max_num_frames_per_episode=args.max_episode_frames,
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    envs = make_envs(args)
    n, steps = args.num_envs, args.num_steps
    agent = Agent(int(envs.single_action_space.n)).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    obs = torch.zeros((steps, n, *envs.single_observation_space.shape), device=device)
    actions = torch.zeros((steps, n), device=device)
    logprobs = torch.zeros((steps, n), device=device)
    rewards = torch.zeros((steps, n), device=device)
    dones = torch.zeros((steps, n), device=device)
    values = torch.zeros((steps, n), device=device)
    returns_window: deque[float] = deque(maxlen=100)
    episode_return = np.zeros(n, np.float64)
    episodes = 0
    global_step = 0
    next_obs_np, _ = envs.reset(seed=args.seed)
    next_obs = torch.tensor(next_obs_np, device=device, dtype=torch.float32)
    next_done = torch.zeros(n, device=device)
    num_updates = args.total_timesteps // args.batch_size
    metrics = (args.out / "metrics.jsonl").open("w")
    for update in range(1, num_updates + 1):
        t_iter = time.perf_counter()
        optimizer.param_groups[0]["lr"] = (1.0 - (update - 1.0) / num_updates) * args.learning_rate
        t_env = t_inf = 0.0
        for step in range(steps):
            global_step += n
            obs[step] = next_obs
            dones[step] = next_done
            t0 = time.perf_counter()
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob
            action_np = action.cpu().numpy()
            t1 = time.perf_counter()
            next_obs_np, reward, term, trunc, _ = envs.step(action_np)
            t2 = time.perf_counter()
            done = term | trunc
            episode_return += reward
            for i in np.flatnonzero(done):
                returns_window.append(float(episode_return[i]))
                episode_return[i] = 0.0
                episodes += 1
            rewards[step] = torch.as_tensor(np.clip(reward, -1, 1), device=device).float()
            next_obs = torch.tensor(next_obs_np, device=device, dtype=torch.float32)
            next_done = torch.as_tensor(done, device=device).float()
            t_inf += (t1 - t0) + (time.perf_counter() - t2)
            t_env += t2 - t1
        t_sample = time.perf_counter() - t_iter

        t_learn = time.perf_counter()
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = 0
            for t in reversed(range(steps)):
                if t == steps - 1:
                    nextnonterminal = 1.0 - next_done
                    nextvalues = next_value
                else:
                    nextnonterminal = 1.0 - dones[t + 1]
                    nextvalues = values[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = (
                    delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
                )
            returns = advantages + values
        b_obs = obs.reshape((-1, *envs.single_observation_space.shape))
        b_logprobs, b_actions = logprobs.reshape(-1), actions.reshape(-1)
        b_advantages, b_returns, b_values = (
            advantages.reshape(-1),
            returns.reshape(-1),
            values.reshape(-1),
        )
        b_inds = np.arange(args.batch_size)
        clipfracs = []
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, args.batch_size, args.minibatch_size):
                mb = b_inds[start : start + args.minibatch_size]
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                    b_obs[mb], b_actions.long()[mb]
                )
                logratio = newlogprob - b_logprobs[mb]
                ratio = logratio.exp()
                with torch.no_grad():
                    clipfracs.append(((ratio - 1.0).abs() > args.clip_coef).float().mean())
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
        clip_fraction = float(torch.stack(clipfracs).mean())  # one device sync per iteration
        now = time.perf_counter()
        mean = float(np.mean(returns_window)) if returns_window else None
        row = {
            "iteration": update,
            "env_steps": global_step,
            "episodes": episodes,
            "episode_return_mean": mean,
            "clip_fraction": clip_fraction,
            "env_steps_per_s": args.batch_size / (now - t_iter),
            "time_sample_s": t_sample,
            "time_env_step_s": t_env,
            "time_inference_s": t_inf,
            "time_sgd_s": now - t_learn,
            "time_iteration_s": now - t_iter,
            "time_s": time.monotonic() - START,
        }
        metrics.write(json.dumps(row) + "\n")
        metrics.flush()
        reached = args.stop_return is not None and len(returns_window) == 100
        if (reached and mean is not None and mean >= args.stop_return) or (
            row["time_s"] >= args.seconds
        ):
            break
    metrics.close()
    envs.close()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())

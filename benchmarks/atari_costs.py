"""Where an Atari iteration's time goes on this machine, per row: the image networks' SGD step,
value pass and acting forward at the preset's shapes, channels-last against contiguous memory,
value-pass slice sizes, and the bare AtariVectorEnv at 1 and 2 threads.

These are the numbers the atari preset's CPU choices rest on (trainer/presets.py, its note);
`benchmarks/atari.py` measures the whole run. Run on a quiet machine:

    .venv/bin/python -m benchmarks.atari_costs [--rows 4096] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

NETWORKS: dict[str, tuple[int, tuple[int, ...], int]] = {
    # name: (frame size, conv channels, dense units)
    "Nature CNN @84 (rl_games, CleanRL)": (84, (32, 64, 64), 512),
    "Nature CNN @64": (64, (32, 64, 64), 512),
    "DQN 2013 / A3C @84": (84, (16, 32), 256),
    "DQN 2013 / A3C @64 (the preset)": (64, (16, 32), 256),
}


def _module(hw: int, channels: tuple[int, ...], dense: int) -> Any:
    import gymnasium as gym

    from trainer.config import ModelConfig
    from trainer.module import PPOModule
    from trainer.obs_layout import declare

    space = declare(gym.spaces.Box(0, 255, (4, hw, hw), np.uint8), "channels_first")
    model = ModelConfig(vf_share_layers=True, cnn_channels=channels, cnn_dense=dense)
    return PPOModule(space, gym.spaces.Discrete(6), model)


def _best_of(fn: Any, repeats: int = 2) -> float:
    fn()  # warm-up: oneDNN picks its kernels on the first call
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _sgd_epoch(module: Any, opt: Any, obs: torch.Tensor, minibatch: int) -> None:
    for i in range(len(obs) // minibatch):
        d, v = module.forward_train(obs[i * minibatch : (i + 1) * minibatch])
        (d.logsumexp(-1).sum() + v.sum()).backward()
        opt.step()
        opt.zero_grad()


def _forward_all(fn: Any, obs: torch.Tensor, rows: int) -> None:
    with torch.no_grad():
        for i in range(0, len(obs), rows):
            fn(obs[i : i + rows])


def _network_row(name: str, rows: int) -> dict[str, Any]:
    hw, channels, dense = NETWORKS[name]
    torch.manual_seed(0)
    module = _module(hw, channels, dense)
    opt = torch.optim.Adam(module.parameters(), 1e-4, fused=True)
    obs = torch.randint(0, 255, (rows, 4, hw, hw), dtype=torch.uint8)
    result: dict[str, Any] = {"network": name}
    for mb in (256, 2048):
        cost = _best_of(lambda: _sgd_epoch(module, opt, obs, mb))  # noqa: B023 (called at once)
        result[f"sgd_mb{mb}_us"] = cost / rows * 1e6
    result["value_us"] = _best_of(lambda: _forward_all(module.values, obs, 256)) / rows * 1e6
    result["act_us"] = _best_of(lambda: _forward_all(module.dist_inputs, obs, 64)) / rows * 1e6
    return result


def network_costs(rows: int) -> list[dict[str, Any]]:
    """us per row: SGD step (minibatch 256 and 2048), value pass (256-row slices), acting
    (64-row batches, one per vector step)."""
    out = []
    for name in NETWORKS:
        out.append(_network_row(name, rows))
        print(json.dumps(out[-1]), flush=True)
    return out


def layout_costs(rows: int) -> list[dict[str, Any]]:
    """The Nature CNN @84's SGD step (minibatch 256) with channels-last against contiguous
    weights and activations, and its value pass by slice size."""
    out = []
    hw, channels, dense = NETWORKS["Nature CNN @84 (rl_games, CleanRL)"]
    obs = torch.randint(0, 255, (rows, 4, hw, hw), dtype=torch.uint8)
    for layout in ("channels_last", "contiguous"):
        torch.manual_seed(0)
        module = _module(hw, channels, dense)
        if layout == "contiguous":  # the encoder as it was: no channels-last anywhere
            module = module.to(memory_format=torch.contiguous_format)
            enc = module.pi_encoder
            enc.forward = lambda x, e=enc: e.dense(e.conv(x.to(torch.float32) * e.scale))  # type: ignore[method-assign]
        opt = torch.optim.Adam(module.parameters(), 1e-4, fused=True)
        row: dict[str, Any] = {"layout": layout}
        cost = _best_of(lambda: _sgd_epoch(module, opt, obs, 256))  # noqa: B023 (called at once)
        row["sgd_mb256_us"] = cost / rows * 1e6
        if layout == "channels_last":
            for n in (256, 2048):
                cost = _best_of(lambda: _forward_all(module.values, obs, n))  # noqa: B023
                row[f"value_slices{n}_us"] = cost / rows * 1e6
        out.append(row)
        print(json.dumps(row), flush=True)
    return out


def bare_env(seconds_steps: int = 150) -> list[dict[str, Any]]:
    """The bare AtariVectorEnv (64 Pong games, random actions) at 1 and 2 threads."""
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    out = []
    for hw in (84, 64):
        for threads in (1, 2):
            env = gym.make_vec(
                "ALE/Pong-v5",
                num_envs=64,
                vectorization_mode="vector_entry_point",
                num_threads=threads,
                img_height=hw,
                img_width=hw,
                repeat_action_probability=0.0,
            )
            env.reset(seed=0)
            rng = np.random.default_rng(0)
            for _ in range(20):
                env.step(rng.integers(0, 6, 64))
            t = time.perf_counter()
            for _ in range(seconds_steps):
                env.step(rng.integers(0, 6, 64))
            rate = seconds_steps * 64 / (time.perf_counter() - t)
            env.close()
            row = {"frames": hw, "threads": threads, "env_steps_per_s": rate}
            out.append(row)
            print(json.dumps(row), flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (all cores)")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    from trainer.resolve import usable_cores

    torch.set_num_threads(args.threads or usable_cores())
    results = {
        "torch_threads": torch.get_num_threads(),
        "networks": network_costs(args.rows),
        "layout": layout_costs(args.rows),
        "bare_env": bare_env(),
    }
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

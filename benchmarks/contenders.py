"""How each contender is started and where its progress is read from.

Peers run from their own virtual environments under benchmarks/.peers (``make -C benchmarks
peers``); CleanRL's script needs only torch, gymnasium and numpy and runs in the SB3 one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from benchmarks.progress import EpisodeProgress, RolloutProgress
from trainer.resolve import zoo_entry, zoo_env_kwargs

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
PEERS_DIR = BENCH_DIR / ".peers"
PEER_SCRIPTS = BENCH_DIR / "peers"
ENV_ID = "CartPole-v1"  # the env of CleanRL's and RLlib's scripts


@dataclass(frozen=True)
class Contender:
    """A program to time. kind "rollout": the `rollout train` CLI, progress in DIR/metrics.jsonl;
    kind "episodes": a peer script that appends one line per finished episode to $BENCH_REPORT."""

    name: str
    kind: Literal["rollout", "episodes"]
    executable: Path  # `rollout` entry point, or the peer venv's python
    describe: str
    script: Path | None = None
    extra_args: tuple[str, ...] = ()  # rollout: more `rollout train` flags (e.g. --set K=V)
    zoo: bool = False  # the script takes --env and the rl-zoo entry of its preset (--entry)

    def command(self, env_id: str, seed: int, target: float, run_dir: Path) -> list[str]:
        if self.kind == "rollout":
            return [
                str(self.executable),
                "train",
                "--env",
                env_id,
                "--stop-return",
                f"{target:g}",
                "--seed",
                str(seed),
                *self.extra_args,
                "--out",
                str(run_dir / "out"),
            ]
        assert self.script is not None, "an episodes contender runs a script"
        command = [str(self.executable), str(self.script), "--seed", str(seed)]
        command += ["--target", str(target)]
        if self.zoo:
            command += ["--env", env_id, *zoo_args(env_id)]
        elif env_id != ENV_ID:
            raise ValueError(f"{self.name} runs {ENV_ID} only, not {env_id}")
        return command

    def progress(self, run_dir: Path) -> EpisodeProgress | RolloutProgress:
        if self.kind == "rollout":
            return RolloutProgress(run_dir / "out" / "metrics.jsonl")
        return EpisodeProgress(run_dir / "episodes.jsonl")

    def env(self, run_dir: Path) -> dict[str, str]:
        """Extra environment: where peers append their episode lines."""
        if self.kind == "rollout":
            return {}
        return {"BENCH_REPORT": str(run_dir / "episodes.jsonl")}


def zoo_args(env_id: str) -> list[str]:
    """The SB3 peer's side of a like-for-like run: the rl-zoo entry that `env_id`'s preset was
    ported from (`--entry`) and the gymnasium.make kwargs the preset gives the env
    (`--env-kwargs`, as rl-zoo's train.py takes them), as command-line arguments."""
    entry = zoo_entry(env_id)
    if entry is None:
        raise ValueError(f"{env_id}: no rl-zoo entry behind its preset (trainer/presets.py)")
    args = ["--entry", json.dumps(entry)]
    kwargs = zoo_env_kwargs(env_id)
    return [*args, "--env-kwargs", json.dumps(kwargs)] if kwargs else args


def _peer(name: str, venv: str, describe: str, *, zoo: bool = False) -> Contender:
    python = PEERS_DIR / venv / "bin" / "python"
    script = PEER_SCRIPTS / f"{name}_ppo.py"
    return Contender(name, "episodes", python, describe, script, zoo=zoo)


CONTENDERS: dict[str, Contender] = {
    "rollout": Contender(
        "rollout",
        "rollout",
        REPO / ".venv" / "bin" / "rollout",
        "Rollout, its preset for the env (serial mode)",
    ),
    "sb3": _peer(
        "sb3", "sb3", "SB3 2.9.2 PPO, the preset's rl-zoo entry, 1 torch thread", zoo=True
    ),
    "cleanrl": _peer("cleanrl", "sb3", "CleanRL ppo.py defaults"),
    "rllib": _peer("rllib", "rllib", "RLlib 2.60 PPO, tuned example, 1 EnvRunner x 8 envs"),
}

PEERS = ("sb3", "cleanrl", "rllib")

"""How each contender is started and where its progress is read from.

Peers run from their own virtual environments under benchmarks/.peers (``make -C benchmarks
peers``); CleanRL's script needs only torch, gymnasium and numpy and runs in the SB3 one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benchmarks.progress import EpisodeProgress, RolloutProgress

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
PEERS_DIR = BENCH_DIR / ".peers"
PEER_SCRIPTS = BENCH_DIR / "peers"
ENV_ID = "CartPole-v1"


@dataclass(frozen=True)
class Contender:
    name: str
    python: Path  # interpreter (peers) or entry point (Rollout) that must exist
    describe: str

    def command(self, seed: int, target: float, run_dir: Path) -> list[str]:
        if self.name == "rollout":
            return [
                str(self.python),
                "train",
                "--env",
                ENV_ID,
                "--stop-return",
                str(target),
                "--seed",
                str(seed),
                "--out",
                str(run_dir / "out"),
            ]
        script = PEER_SCRIPTS / f"{self.name}_ppo.py"
        return [str(self.python), str(script), "--seed", str(seed), "--target", str(target)]

    def progress(self, run_dir: Path) -> EpisodeProgress | RolloutProgress:
        if self.name == "rollout":
            return RolloutProgress(run_dir / "out" / "metrics.jsonl")
        return EpisodeProgress(run_dir / "episodes.jsonl")

    def env(self, run_dir: Path) -> dict[str, str]:
        """Extra environment: where peers append episode lines."""
        return {} if self.name == "rollout" else {"BENCH_REPORT": str(run_dir / "episodes.jsonl")}


CONTENDERS: dict[str, Contender] = {
    "rollout": Contender(
        "rollout", REPO / ".venv" / "bin" / "rollout", "Rollout, default PPOConfig, serial mode"
    ),
    "sb3": Contender(
        "sb3",
        PEERS_DIR / "sb3" / "bin" / "python",
        "SB3 2.9.2 PPO, rl-zoo CartPole params, 1 torch thread",
    ),
    "cleanrl": Contender(
        "cleanrl", PEERS_DIR / "sb3" / "bin" / "python", "CleanRL ppo.py defaults (4x128)"
    ),
    "rllib": Contender(
        "rllib",
        PEERS_DIR / "rllib" / "bin" / "python",
        "RLlib 2.60 PPO new stack, tuned example, 1 EnvRunner x 8 envs",
    ),
}

PEERS = ("sb3", "cleanrl", "rllib")

"""`python -m trainer.warmup`: a no-op Ray job that warms a freshly started Ray head up.

The first job on a new head pays for what later jobs find ready: Ray's job agent and runtime-env
agent serve their first request, and the driver reads torch, gymnasium and the trainer from a
cold page cache and initialises them (torch's first module, forward and backward pass). The
service runs this job once, in the background, right after it starts its local head, so the
first experiment starts as fast as the ones after it. It trains one tiny serial-mode CartPole
iteration, reports nothing, writes nothing, and takes no CPU of the head's budget
(`entrypoint_num_cpus=0`).
"""

from __future__ import annotations

import sys
import time


def main() -> int:
    t0 = time.monotonic()
    from trainer.algorithm import PPO
    from trainer.config import PPOConfig

    imported = time.monotonic() - t0
    config = PPOConfig(
        env_id="CartPole-v1",
        num_envs_per_env_runner=2,
        train_batch_size_per_learner=64,
        minibatch_size=32,
        num_epochs=1,
        stop={"env_steps": 64},
        checkpoint_every=0,
    )
    algo = PPO(config, start_time=t0)
    try:
        algo.train()
    finally:
        algo.stop()
    total = time.monotonic() - t0
    print(f"warm-up done in {total:.2f}s (imports {imported:.2f}s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

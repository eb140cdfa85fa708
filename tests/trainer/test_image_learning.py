"""The CNN path learns: a tiny image task (tests/trainer/image_envs.py) on CPU in seconds.

Measured on a loaded 2-core machine (serial mode, seeds 0 / 1 / 2): a 100-episode mean of 7.5
(of 8) after 4.6k / 4.1k / 3.6k env steps, 1.4-3.4 s of training. A policy that does not read
the pixels averages 4 (the patch's side is random every step; the 100-episode mean of such a
policy has a standard deviation of 0.14), so 7.5 cannot be reached without the image.
"""

from __future__ import annotations

from tests.trainer import image_envs
from trainer.algorithm import PPO
from trainer.config import PPOConfig
from trainer.module import CNNEncoder

CONFIG = {
    "env_id": f"tests.trainer.image_envs:{image_envs.PATCH_SIDE}",
    "seed": 0,
    "num_envs_per_env_runner": 16,
    "train_batch_size_per_learner": 512,
    "minibatch_size": 128,
    "num_epochs": 4,
    "lr": 1e-3,
    "gamma": 0.9,
    "gae_lambda": 0.9,
    # One 8x8 stride-4 conv (the Nature CNN's first layer) fits 12x12 images; its next layers
    # would not.
    "model": {"cnn_channels": [16], "vf_share_layers": True},
    "stop": {"episode_return_mean": 7.5, "env_steps": 20_000, "wall_seconds": 300},
}


def test_the_cnn_reads_the_image_and_learns() -> None:
    algo = PPO(PPOConfig.model_validate(CONFIG))
    try:
        learner = algo.learner_group.local
        assert learner is not None and isinstance(learner.module.pi_encoder, CNNEncoder)
        runner = algo.env_runners.local
        assert runner is not None and runner.env.single_observation_space.dtype.name == "uint8"
        first = algo.train()
        assert first["episode_return_mean"] < 5.0  # the untrained policy guesses
        while algo.stop_reason() is None:
            algo.train()
        reason, ret, steps = algo.stop_reason(), algo.window.return_mean, algo.env_steps
    finally:
        algo.stop()
    assert reason == "episode_return_mean", f"return {ret:.2f} after {steps} env steps"

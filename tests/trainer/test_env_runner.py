"""EnvRunner: episode chunks across sample() calls, autoreset handling, actions, weights."""

from __future__ import annotations

import itertools
from collections import defaultdict

import gymnasium as gym
import numpy as np
import pytest
import torch

from trainer.config import PPOConfig
from trainer.env_runner import EnvRunner, SampleResult
from trainer.episode import EpisodeChunk

MAX_STEPS = 12  # CartPole's TimeLimit via env_config: plenty of truncations AND terminations


def _runner(**overrides: object) -> EnvRunner:
    config = PPOConfig.model_validate(
        {
            "num_envs_per_env_runner": 4,
            "env_config": {"max_episode_steps": MAX_STEPS},
            **overrides,
        }
    )
    torch.manual_seed(0)
    return EnvRunner(config)


def _sample_many(runner: EnvRunner, calls: int, steps: int) -> list[SampleResult]:
    return [runner.sample(steps) for _ in range(calls)]


def _cartpole_step(state: np.ndarray, action: int) -> np.ndarray:
    """CartPole's deterministic dynamics, through gymnasium's own single env."""
    env = gym.make("CartPole-v1").unwrapped
    env.reset(seed=0)
    env.state = state.astype(np.float64)
    obs, *_ = env.step(int(action))
    return obs


def test_chunks_continue_across_sample_calls() -> None:
    runner = _runner()
    results = _sample_many(runner, calls=6, steps=37)  # 37: not a multiple of N, cuts mid-way
    by_id: dict[str, list[EpisodeChunk]] = defaultdict(list)
    for result in results:
        assert result.env_steps >= 37
        assert result.env_steps == sum(len(c) for c in result.chunks)
        for chunk in result.chunks:
            assert len(chunk.obs) == len(chunk) + 1
            by_id[chunk.id].append(chunk)
    continued = 0
    for chunks in by_id.values():
        assert chunks[0].t_started == 0
        for prev, nxt in itertools.pairwise(chunks):
            assert not prev.is_done, "only a cut chunk may continue"
            assert nxt.t_started == prev.t_started + len(prev)
            np.testing.assert_array_equal(prev.obs[-1], nxt.obs[0])
            continued += 1
        for chunk in chunks[:-1]:
            assert not chunk.is_done
    assert continued > 0


def test_terminated_truncated_and_cut_chunks_carry_true_final_obs() -> None:
    runner = _runner()
    results = _sample_many(runner, calls=4, steps=64)
    kinds = defaultdict(int)
    for chunk in (c for r in results for c in r.chunks):
        end = chunk.t_started + len(chunk)
        if chunk.truncated:
            kinds["truncated"] += 1
            assert end == MAX_STEPS and not chunk.terminated
        elif chunk.terminated:
            kinds["terminated"] += 1
            x, _, theta, _ = chunk.obs[-1]
            assert abs(x) > 2.4 or abs(theta) > 12 * 2 * np.pi / 360, "s_T must be terminal"
            assert end < MAX_STEPS or end == MAX_STEPS
        else:
            kinds["cut"] += 1
            assert end < MAX_STEPS
        # Every transition, including the last one into s_T, follows CartPole's dynamics: no
        # reset observation ever stands in for a final one.
        for t in range(len(chunk)):
            np.testing.assert_allclose(
                _cartpole_step(chunk.obs[t], chunk.actions[t]), chunk.obs[t + 1], atol=1e-5
            )
    assert kinds["truncated"] and kinds["terminated"] and kinds["cut"], kinds


def test_first_obs_of_each_episode_is_a_reset_obs() -> None:
    runner = _runner()
    results = _sample_many(runner, calls=3, steps=64)
    starts = [c.obs[0] for r in results for c in r.chunks if c.t_started == 0]
    assert len(starts) > 4
    assert np.all(np.abs(np.stack(starts)) <= 0.05)  # CartPole resets uniformly in +-0.05


def test_episode_returns_are_summed_over_chunks() -> None:
    runner = _runner(env_config={"max_episode_steps": 40})
    results = _sample_many(runner, calls=8, steps=23)  # episodes span several calls
    totals: dict[str, float] = defaultdict(float)
    lengths: dict[str, int] = defaultdict(int)
    finished_ids: list[str] = []
    for result in results:
        for chunk in result.chunks:
            totals[chunk.id] += float(chunk.rewards.sum())
            lengths[chunk.id] += len(chunk)
            if chunk.is_done:
                finished_ids.append(chunk.id)
    reported = [
        (r, n)
        for res in results
        for r, n in zip(res.episode_returns, res.episode_lengths, strict=True)
    ]
    expected = [(totals[i], lengths[i]) for i in finished_ids]
    assert sorted(reported) == sorted(expected)
    assert any(n > 23 / 4 for _, n in reported), "some episode must span several calls"


def test_box_actions_stored_as_sampled_env_gets_clipped() -> None:
    runner = _runner(env_id="Pendulum-v1", env_config={"max_episode_steps": 10})
    sent: list[np.ndarray] = []
    step = runner.env.step

    def recording_step(actions: np.ndarray):  # type: ignore[no-untyped-def]
        sent.append(np.array(actions))
        return step(actions)

    runner.env.step = recording_step  # type: ignore[method-assign]
    result = runner.sample(400)
    stored = np.concatenate([c.actions for c in result.chunks])
    assert stored.dtype == np.float32 and stored.shape[1] == 1
    assert np.abs(stored).max() > 2.0, "std-1 Gaussian samples should leave [-2, 2] sometimes"
    sent_all = np.concatenate(sent)
    assert np.abs(sent_all).max() <= 2.0
    for chunk in result.chunks:  # Pendulum only truncates: every chunk ends truncated or cut
        assert not chunk.terminated
        assert chunk.truncated == (chunk.t_started + len(chunk) == 10)


def test_set_weights_ignores_older_versions() -> None:
    runner = _runner()
    weights = {k: v.numpy().copy() for k, v in runner.module.inference_state_dict().items()}
    zeros = {k: np.zeros_like(v) for k, v in weights.items()}
    assert runner.set_weights(3, zeros)
    assert not runner.set_weights(2, weights)
    assert runner.weights_version == 3
    assert all(float(v.abs().sum()) == 0 for v in runner.module.inference_state_dict().values())
    result = runner.sample(8)
    assert result.weights_version == 3
    assert all(c.weights_version == 3 for c in result.chunks)


def test_same_seed_same_samples() -> None:
    a, b = _runner(seed=7), _runner(seed=7)
    torch.manual_seed(1)
    ra = a.sample(50)
    torch.manual_seed(1)  # serial mode samples with the process's torch RNG
    rb = b.sample(50)
    assert len(ra.chunks) == len(rb.chunks)
    for ca, cb in zip(ra.chunks, rb.chunks, strict=True):
        np.testing.assert_array_equal(ca.obs, cb.obs)
        np.testing.assert_array_equal(ca.actions, cb.actions)


@pytest.mark.parametrize("frame_stack", [1, 3])
def test_chunk_obs_are_module_inputs(frame_stack: int) -> None:
    runner = _runner(frame_stack=frame_stack, normalize_observations=True)
    result = runner.sample(40)
    assert runner.env_to_module.output_space.shape == (4 * frame_stack,)
    for chunk in result.chunks:
        assert chunk.obs.shape[1:] == (4 * frame_stack,)
        assert chunk.obs.dtype == np.float32
        if chunk.t_started == 0 and frame_stack > 1:
            assert np.all(chunk.obs[0][: 4 * (frame_stack - 1)] == 0), "no frames before reset"


def test_buffers_grow_when_autoreset_steps_pile_up() -> None:
    """One-step episodes: every other vector step is an autoreset step, so the call needs
    about twice the preallocated rows."""
    runner = _runner(env_config={"max_episode_steps": 1})
    result = runner.sample(200)
    assert result.env_steps >= 200
    assert all(len(c) == 1 and c.is_done for c in result.chunks)
    assert len(result.episode_returns) == len(result.chunks)
    assert all(c.t_started == 0 for c in result.chunks)


@pytest.mark.parametrize(("freq", "draws"), [(-1, 1), (4, 3), (1, 10)])
def test_gsde_noise_is_drawn_per_rollout_and_every_sde_sample_freq_steps(
    freq: int, draws: int
) -> None:
    runner = _runner(
        env_id="Pendulum-v1",
        env_config={"max_episode_steps": 50},
        model={"use_sde": True},
        sde_sample_freq=freq,
    )
    drawn: list[np.ndarray] = []
    sde_noise = runner.new_sde_noise

    def recording(n: int) -> np.ndarray:
        drawn.append(sde_noise(n))  # type: ignore[arg-type]
        return drawn[-1]

    runner.new_sde_noise = recording  # type: ignore[method-assign]
    runner.sample(4 * 10)  # 10 vector steps of 4 envs
    assert len(drawn) == draws and drawn[0].shape[0] == 4
    runner.sample(4 * 10)  # a new rollout starts with new matrices
    assert len(drawn) == 2 * draws
    # Deterministic sampling draws nothing.
    runner.sample(4 * 10, explore=False)
    assert len(drawn) == 2 * draws

"""The hand-written PPO step computes autograd's gradients; FlatAdam is torch's Adam; the fast
value pass is PPOModule.values; the reference loss reads only the config fields the
hand-written step implements.

Each case builds two Learners from one seed (same initial weights), one on the hand-written
step and one on autograd, and compares every parameter's gradient and every reported loss on a
minibatch whose ratios and value errors straddle their clip ranges (so each branch of the
clipped objectives carries rows).
"""

from __future__ import annotations

import copy
import itertools

import gymnasium as gym
import numpy as np
import pytest
import torch

from trainer.batch import TrainBatch
from trainer.config import ModelConfig, PPOConfig
from trainer.fast.flat_adam import FlatAdam, FlatParameters
from trainer.fast.hand_grad import LOSS_FIELDS, TORCH_MATMUL_MIN, supports
from trainer.fast.threads import ThreadChoice
from trainer.fast.values import _SIGMOID_FORM_MIN_NUMEL, MLPValues, _tanh_
from trainer.learner import PPOLearner
from trainer.losses import ppo_losses, total_loss
from trainer.module import PPOModule
from trainer.optim import EagerAdam

OBS = gym.spaces.Box(-1.0, 1.0, (5,), np.float32)
ACTIONS = {
    "categorical": gym.spaces.Discrete(4),
    "gaussian": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
    "gsde": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
}
HIDDEN = (16, 16)
LARGE_ROWS = 2056  # as many rows as a whole train batch's value pass


def _config(
    dist: str, activation: str, shared: bool, vf_clip: float | None, ent: float
) -> PPOConfig:
    return PPOConfig(
        seed=3,
        train_batch_size_per_learner=256,
        minibatch_size=64,
        num_epochs=2,
        clip_param=0.2,
        vf_clip_param=vf_clip,
        entropy_coeff=ent,
        vf_loss_coeff=0.7,
        grad_clip=0.5,
        model=ModelConfig(
            hidden_sizes=HIDDEN,
            activation=activation,
            vf_share_layers=shared,
            use_sde=dist == "gsde",
            log_std_init=-0.5,
        ),
    )


def _learners(config: PPOConfig, dist: str) -> tuple[PPOLearner, PPOLearner]:
    hand = PPOLearner(config, OBS, ACTIONS[dist])
    auto = PPOLearner(config, OBS, ACTIONS[dist], sgd_step="autograd")
    assert hand.sgd_step.name == "hand-written" and auto.sgd_step.name == "autograd"
    return hand, auto


def _gradients(learner: PPOLearner, mb: TrainBatch) -> torch.Tensor:
    """The Learner's step's gradients of `mb` into param.grad; its [5] losses as float32."""
    step = learner.sgd_step
    return torch.as_tensor(step.gradients(step.prepare(mb), learner.kl_coeff)).float()


def _minibatch(learner: PPOLearner, rows: int, seed: int) -> TrainBatch:
    """Sampled actions, then old log-probs and old values moved off the current ones, so that
    some ratios leave [0.8, 1.2] and some value changes leave [-c, c]."""
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(rows, *OBS.shape, generator=g)
    torch.manual_seed(seed)
    actions, logp, dist_inputs = learner.module.sample(obs)
    with torch.no_grad():
        values = learner.module.values(obs)
    return TrainBatch(
        obs=obs,
        actions=actions,
        logp=logp + 0.4 * torch.randn(rows, generator=g),
        dist_inputs=dist_inputs + 0.1 * torch.randn(dist_inputs.shape, generator=g),
        advantages=torch.randn(rows, generator=g),
        value_targets=values + torch.randn(rows, generator=g),
        values=values + 0.3 * torch.randn(rows, generator=g),
    )


CASES = list(
    itertools.product(
        ("categorical", "gaussian", "gsde"),
        ("tanh", "relu"),
        (False, True),
        (None, 0.2),
        (0.0, 0.01),
    )
)


@pytest.mark.parametrize(("dist", "activation", "shared", "vf_clip", "ent"), CASES)
def test_gradients_and_losses_match_autograd(
    dist: str, activation: str, shared: bool, vf_clip: float | None, ent: float
) -> None:
    hand, auto = _learners(_config(dist, activation, shared, vf_clip, ent), dist)
    for rows in (64, LARGE_ROWS):
        mb = _minibatch(auto, rows, seed=rows)
        losses_hand = _gradients(hand, mb)
        losses_auto = _gradients(auto, mb)
        torch.testing.assert_close(losses_hand, losses_auto, rtol=1e-5, atol=1e-6)
        assert 0.05 < losses_hand[4] < 0.95  # clipped and unclipped rows both present
        for (name, p_hand), p_auto in zip(
            hand.module.named_parameters(), auto.module.parameters(), strict=True
        ):
            assert p_hand.grad is not None and p_auto.grad is not None
            assert p_auto.grad.abs().sum() > 0, name
            torch.testing.assert_close(p_hand.grad, p_auto.grad, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("threads", [1, 2])
def test_wide_layers_take_torchs_matmul_and_match_autograd(threads: int) -> None:
    """256-wide layers (rl-zoo's MuJoCo policy): their 64-row products go through torch.mm on
    views of the numpy arrays (fast/hand_grad.py `_matmul`), on one thread or two."""
    config = _config("gaussian", "relu", False, None, 0.01)
    config = config.model_copy(
        update={
            "torch_num_threads": threads,
            "model": config.model.model_copy(update={"hidden_sizes": (256, 256)}),
        }
    )
    hand, auto = _learners(config, "gaussian")
    assert 64 * 256 * 256 >= TORCH_MATMUL_MIN > 64 * 16 * 16
    mb = _minibatch(auto, 64, seed=5)
    torch.testing.assert_close(_gradients(hand, mb), _gradients(auto, mb), rtol=1e-5, atol=1e-6)
    for (name, p_hand), p_auto in zip(
        hand.module.named_parameters(), auto.module.parameters(), strict=True
    ):
        torch.testing.assert_close(p_hand.grad, p_auto.grad, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("dist", ["categorical", "gsde"])
def test_whole_sgd_phases_track_autograd(dist: str) -> None:
    """Two epochs of 4 minibatches (clipping, Adam) leave both Learners' weights together."""
    hand, auto = _learners(_config(dist, "tanh", False, 0.2, 0.01), dist)
    batch = _minibatch(auto, 256, seed=7)
    sums_hand, sums_auto = hand._sgd(batch), auto._sgd(batch)
    torch.testing.assert_close(sums_hand, sums_auto, rtol=1e-4, atol=1e-5)
    for p_hand, p_auto in zip(hand.module.parameters(), auto.module.parameters(), strict=True):
        torch.testing.assert_close(p_hand, p_auto, rtol=1e-4, atol=1e-5)


def test_paths_are_chosen_by_what_the_hand_step_covers() -> None:
    base = _config("categorical", "tanh", False, None, 0.0)
    assert PPOLearner(base, OBS, ACTIONS["categorical"]).sgd_step.name == "hand-written"
    kl = base.model_copy(update={"kl_coeff": 0.2})
    assert PPOLearner(kl, OBS, ACTIONS["categorical"]).sgd_step.name == "autograd"
    bf16 = base.model_copy(update={"learner_precision": "bf16"})
    assert PPOLearner(bf16, OBS, ACTIONS["categorical"]).sgd_step.name == "autograd"
    images = gym.spaces.Box(0, 255, (36, 36, 1), np.uint8)
    cnn = PPOLearner(base, images, ACTIONS["categorical"])
    assert cnn.sgd_step.name == "autograd" and not isinstance(cnn.optimizer, FlatAdam)
    with pytest.raises(ValueError, match="does not cover"):
        PPOLearner(kl, OBS, ACTIONS["categorical"], sgd_step="hand-written")


class _RecordingConfig:
    """A PPOConfig that records the names of the fields read from it."""

    def __init__(self, config: PPOConfig) -> None:
        self._config = config
        self.read: set[str] = set()

    def __getattr__(self, name: str) -> object:
        self.read.add(name)
        return getattr(self._config, name)


@pytest.mark.parametrize("dist", ["categorical", "gaussian", "gsde"])
def test_the_loss_reads_only_config_fields_the_hand_written_step_implements(dist: str) -> None:
    """A loss term on a new config field would be silently missing from the hand-written
    gradients: the reference loss may read only what the hand-written step declares."""
    read: set[str] = set()
    for vf_clip, ent, kl_coeff in ((None, 0.0, 0.0), (0.2, 0.01, 0.3)):  # every branch
        config = _config(dist, "tanh", False, vf_clip, ent)
        learner = PPOLearner(config, OBS, ACTIONS[dist], sgd_step="autograd")
        mb = _minibatch(learner, 64, seed=1)
        recording = _RecordingConfig(config)
        terms = ppo_losses(learner.module(mb.obs), mb, recording, learner.module.dist, kl_coeff)  # type: ignore[arg-type]
        total_loss(*terms[:4], recording, kl_coeff)  # type: ignore[arg-type]
        read |= recording.read
    assert {"clip_param", "vf_loss_coeff"} <= read  # the recording sees the reads
    missing = read - LOSS_FIELDS
    assert not missing, (
        f"the PPO loss reads {sorted(missing)}, which trainer/fast/hand_grad.py does not "
        "implement: implement them there (or have supports() refuse the values it does not) "
        "and list them in LOSS_FIELDS"
    )
    assert set(PPOConfig.model_fields) >= LOSS_FIELDS


def test_supports_refuses_what_the_hand_written_step_does_not_implement() -> None:
    config = _config("gaussian", "tanh", False, None, 0.0)
    cpu = torch.device("cpu")
    module = PPOModule(OBS, ACTIONS["gaussian"], config.model)
    assert supports(module, config, cpu, 1)
    for update in ({"kl_coeff": 0.2}, {"learner_precision": "bf16"}):
        assert not supports(module, config.model_copy(update=update), cpu, 1), update
    assert not supports(module, config, torch.device("cuda"), 1)
    assert not supports(module, config, cpu, 2)  # DDP
    policy_only = PPOModule(OBS, ACTIONS["gaussian"], config.model, inference_only=True)
    assert not supports(policy_only, config, cpu, 1)
    images = gym.spaces.Box(0, 255, (36, 36, 1), np.uint8)
    assert not supports(PPOModule(images, ACTIONS["gaussian"], config.model), config, cpu, 1)


@pytest.mark.parametrize("rows", [3, 512, 2048])  # below and above the sigmoid form's threshold
def test_the_sigmoid_form_of_tanh_is_tanh(rows: int) -> None:
    x = torch.randn(rows, 64) * 3
    assert (rows * 64 >= _SIGMOID_FORM_MIN_NUMEL) == (rows >= 512)
    torch.testing.assert_close(_tanh_(x.clone()), torch.tanh(x), rtol=0, atol=1e-6)


@pytest.mark.parametrize("activation", ["tanh", "relu"])
@pytest.mark.parametrize("shared", [False, True], ids=["separate", "shared"])
def test_the_fast_value_pass_is_the_modules(activation: str, shared: bool) -> None:
    """The hand-written step's GAE value pass against PPOModule.values, on the current weights
    (after a step moved them)."""
    config = _config("categorical", activation, shared, None, 0.0)
    hand, auto = _learners(config, "categorical")
    assert isinstance(hand.sgd_step.values, MLPValues)
    hand._sgd(_minibatch(auto, 256, seed=3))
    for rows in (7, LARGE_ROWS):
        obs = torch.randn(rows, *OBS.shape)
        with torch.no_grad():
            expected = hand.module.values(obs)
        got = hand._values(obs)
        assert got.shape == (rows,) and got.dtype == torch.float32
        if activation == "relu" or rows * HIDDEN[0] < _SIGMOID_FORM_MIN_NUMEL:
            assert torch.equal(got, expected)  # the same operations
        else:
            torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
        assert torch.equal(auto._values(obs), auto.module.values(obs))


# --- FlatParameters and FlatAdam -------------------------------------------------------------


def _net(seed: int) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


def _grads(net: torch.nn.Module, step: int) -> None:
    """Deterministic pseudo-gradients written in place (the flat buffer's views stay)."""
    for i, p in enumerate(net.parameters()):
        g = torch.Generator().manual_seed(100 * step + i)
        assert p.grad is not None
        p.grad.copy_(torch.randn(p.shape, generator=g))


def _flat(seed: int) -> tuple[torch.nn.Sequential, FlatAdam]:
    net = _net(seed)
    return net, FlatAdam(FlatParameters(list(net.parameters())), lr=1e-2, eps=1e-5)


def _torch(seed: int) -> tuple[torch.nn.Sequential, EagerAdam]:
    net = _net(seed)
    for p in net.parameters():
        p.grad = torch.zeros_like(p)
    return net, EagerAdam(net.parameters(), lr=1e-2, eps=1e-5, fused=True)


def test_flat_parameters_keep_values_and_share_storage() -> None:
    net, reference = _net(0), _net(0)
    flat = FlatParameters(list(net.parameters()))
    for p, q in zip(net.parameters(), reference.parameters(), strict=True):
        assert torch.equal(p, q)
        assert p.untyped_storage().data_ptr() == flat.data.untyped_storage().data_ptr()
        assert p.grad is not None
        assert p.grad.untyped_storage().data_ptr() == flat.grad.untyped_storage().data_ptr()
    net.load_state_dict(_net(1).state_dict())  # in place: the views survive
    assert torch.equal(flat.data[: net[0].weight.numel()], _net(1)[0].weight.reshape(-1))


def test_flat_clip_matches_clip_grad_norm() -> None:
    net_a, opt_a = _flat(0)
    net_b, _ = _torch(0)
    _grads(net_a, 1)
    _grads(net_b, 1)
    flat = opt_a.flat
    norm_b = torch.nn.utils.clip_grad_norm_(list(net_b.parameters()), 0.5)
    norm_a = flat.clip_grad_norm_(0.5)
    assert norm_a == pytest.approx(float(norm_b), rel=1e-6)
    torch.testing.assert_close(
        flat.grad, torch.cat([p.grad.reshape(-1) for p in net_b.parameters()])
    )


def test_flat_adam_updates_like_torch_adam_and_shares_its_state_dict() -> None:
    net_a, opt_a = _flat(0)
    net_b, opt_b = _torch(0)
    for step in range(5):
        _grads(net_a, step)
        _grads(net_b, step)
        opt_a.step()
        opt_b.step()
    for pa, pb in zip(net_a.parameters(), net_b.parameters(), strict=True):
        torch.testing.assert_close(pa, pb, rtol=1e-6, atol=1e-7)
    # Copies, as a checkpoint holds them (state_dict() hands out the live state tensors).
    state_a, state_b = copy.deepcopy(opt_a.state_dict()), copy.deepcopy(opt_b.state_dict())
    assert state_a["param_groups"] == state_b["param_groups"]
    for i, s in state_b["state"].items():
        assert float(state_a["state"][i]["step"]) == float(s["step"]) == 5.0
        torch.testing.assert_close(state_a["state"][i]["exp_avg"], s["exp_avg"])
        torch.testing.assert_close(state_a["state"][i]["exp_avg_sq"], s["exp_avg_sq"])

    # Cross-loading: each continues from the other's state exactly as it would from its own.
    net_c, opt_c = _flat(0)
    net_c.load_state_dict(net_b.state_dict())
    opt_c.load_state_dict(state_b)
    net_d, opt_d = _torch(0)
    net_d.load_state_dict(net_a.state_dict())
    opt_d.load_state_dict(state_a)
    for net, opt in ((net_a, opt_a), (net_b, opt_b), (net_c, opt_c), (net_d, opt_d)):
        _grads(net, 9)
        opt.step()
    for pa, pb, pc, pd in zip(
        net_a.parameters(), net_b.parameters(), net_c.parameters(), net_d.parameters(), strict=True
    ):
        torch.testing.assert_close(pc, pb, rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(pd, pa, rtol=1e-6, atol=1e-7)
    assert float(opt_c.state_dict()["state"][0]["step"]) == 6.0


class _Fixed(ThreadChoice):
    """A ThreadChoice that always picks the same thread count."""

    def __init__(self, threads: int) -> None:
        super().__init__(threads)
        self.threads = threads

    def pick(self) -> int:
        return self.threads


def test_one_thread_or_two_give_the_same_update() -> None:
    """The SGD phase's thread count is chosen by timing (fast/threads.py ThreadChoice), so it
    must not change the numbers: the wide products split their output rows, not their sums."""
    config = _config("gaussian", "relu", False, None, 0.01)
    config = config.model_copy(
        update={
            "torch_num_threads": 2,
            "model": config.model.model_copy(update={"hidden_sizes": (256, 256)}),
        }
    )
    learners = [PPOLearner(config, OBS, ACTIONS["gaussian"]) for _ in range(2)]
    batch = _minibatch(learners[0], 256, seed=9)
    sums = []
    for threads, learner in zip((1, 2), learners, strict=True):
        learner.sgd_step._threads = _Fixed(threads)  # type: ignore[attr-defined]
        sums.append(learner._sgd(batch))
        assert torch.get_num_threads() == threads
    torch.set_num_threads(1)
    assert torch.equal(sums[0], sums[1])
    for p, q in zip(learners[0].module.parameters(), learners[1].module.parameters(), strict=True):
        assert torch.equal(p, q)


def test_thread_choice_tries_both_keeps_the_faster_and_rechecks_less_often() -> None:
    choice = ThreadChoice(2, recheck=2, max_recheck=8)
    seconds = {1: 1.0, 2: 0.5}

    def run(epochs: int) -> list[int]:
        picked = []
        for _ in range(epochs):
            threads = choice.pick()
            picked.append(threads)
            choice.record(threads, seconds[threads])
        return picked

    # Each once, then the faster; the slower again after 2, 4, 8, 8 epochs (doubled, capped).
    assert run(26) == [1, 2] + [2] * 2 + [1] + [2] * 4 + [1] + [2] * 8 + [1] + [2] * 7
    seconds[2] = 3.0  # the machine changed: two threads got slow
    # One slow epoch flips the choice; rechecks start again at 2 epochs and back off.
    assert run(12) == [2, 1, 1, 2, 1, 1, 1, 1, 2, 1, 1, 1]
    assert choice.best == 1 and choice.interval == 8
    assert ThreadChoice(1).pick() == 1 and ThreadChoice(1).options == (1,)


def test_thread_choice_rechecks_after_the_first_interval_whichever_option_won() -> None:
    """The first round is a choice, not a recheck: one thread winning it backs off no sooner
    than two threads winning it does."""
    choice = ThreadChoice(2, recheck=2, max_recheck=8)
    seconds = {1: 0.5, 2: 1.0}
    picked = []
    for _ in range(12):
        threads = choice.pick()
        picked.append(threads)
        choice.record(threads, seconds[threads])
    assert picked == [1, 2] + [1] * 2 + [2] + [1] * 4 + [2] + [1] * 2

"""PPO loss terms on tiny hand-checked batches, and the action distributions against
torch.distributions."""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributions import Categorical as TorchCategorical
from torch.distributions import Independent, Normal, kl_divergence

from trainer.batch import TrainBatch
from trainer.config import PPOConfig
from trainer.distributions import Categorical, DiagGaussian
from trainer.learner import adapt_kl_coeff, linear_lr
from trainer.losses import ppo_losses, total_loss

LOG_HALF = math.log(0.5)


def _batch(**columns: list) -> TrainBatch:
    n = len(columns["logp"])
    defaults = {
        "obs": torch.zeros(n, 1),
        "actions": torch.zeros(n, dtype=torch.int64),
        "dist_inputs": torch.zeros(n, 2),
        "advantages": torch.zeros(n),
        "value_targets": torch.zeros(n),
        "values": torch.zeros(n),
    }
    given = {k: torch.as_tensor(v, dtype=torch.float32) for k, v in columns.items()}
    return TrainBatch(**{**defaults, **given})


def test_ratio_clipping_by_hand() -> None:
    # New policy: uniform over 2 actions, logp_new = log .5 for every row.
    # Old logp chosen so that ratio = [1.5, 1.5, 0.5, 0.5, 1.0].
    old_logp = [math.log(0.5 / 1.5)] * 2 + [0.0] * 2 + [LOG_HALF]
    adv = [1.0, -1.0, 1.0, -1.0, 2.0]
    mb = _batch(logp=old_logp, advantages=adv)
    new = (torch.zeros(5, 2), torch.zeros(5))
    policy_loss, _, _, _, clip_fraction = ppo_losses(new, mb, PPOConfig(), Categorical)
    # min(A r, A clip(r, .8, 1.2)) = [1.2, -1.5, 0.5, -0.8, 2.0] -> mean 0.28
    assert policy_loss.item() == pytest.approx(-0.28, abs=1e-6)
    assert clip_fraction.item() == pytest.approx(0.8)  # 4 of 5 ratios outside [0.8, 1.2]


def test_policy_gradient_vanishes_where_the_ratio_is_clipped() -> None:
    logits = torch.zeros(2, 2, requires_grad=True)
    # ratio 1.5 with A > 0 (clipped: no gradient) and ratio 1.0 with A > 0 (gradient flows).
    mb = _batch(logp=[math.log(0.5 / 1.5), LOG_HALF], advantages=[1.0, 1.0])
    policy_loss, *_ = ppo_losses((logits, torch.zeros(2)), mb, PPOConfig(), Categorical)
    policy_loss.backward()
    assert logits.grad[0].abs().sum().item() == 0.0
    assert logits.grad[1].abs().sum().item() > 0.0


@pytest.mark.parametrize(
    ("vf_clip", "expected"),
    [
        # unclipped squared errors: (3-2)^2=1, (0-2)^2=4, (2.9-3)^2=.01 -> mean 5.01/3
        (None, (1.0 + 4.0 + 0.01) / 3),
        # clipped predictions old + clip(new - old, +-.5) = 1.5, .5, 1.5 -> errors .25, 2.25, 2.25;
        # the max of both per row: 1, 4, 2.25
        (0.5, (1.0 + 4.0 + 2.25) / 3),
    ],
)
def test_value_loss_by_hand(vf_clip: float | None, expected: float) -> None:
    mb = _batch(logp=[LOG_HALF] * 3, values=[1.0, 1.0, 1.0], value_targets=[2.0, 2.0, 3.0])
    new = (torch.zeros(3, 2), torch.tensor([3.0, 0.0, 2.9]))
    _, vf_loss, *_ = ppo_losses(new, mb, PPOConfig(vf_clip_param=vf_clip), Categorical)
    assert vf_loss.item() == pytest.approx(expected, rel=1e-6)


def test_vf_clip_param_is_ppo2_value_clipping_not_rllibs_error_cap() -> None:
    # RLlib's vf_clip_param=10 would cap the squared error 16 at 10; here it bounds how far the
    # prediction moves from the old one (4 -> 0 is within 10), so the error stays 16.
    mb = _batch(logp=[LOG_HALF], values=[4.0], value_targets=[4.0])
    new = (torch.zeros(1, 2), torch.tensor([0.0]))
    _, vf_loss, *_ = ppo_losses(new, mb, PPOConfig(vf_clip_param=10.0), Categorical)
    assert vf_loss.item() == pytest.approx(16.0)
    # The form and the API show the field's description: it must warn RLlib users.
    description = PPOConfig.model_fields["vf_clip_param"].description or ""
    assert "PPO2" in description and "NOT RLlib's" in description


def test_entropy_and_kl_by_hand() -> None:
    # Old policy uniform; new policy [.75, .25] (logits log 3, 0).
    mb = _batch(logp=[LOG_HALF], dist_inputs=[[0.0, 0.0]])
    new = (torch.tensor([[math.log(3.0), 0.0]]), torch.zeros(1))
    _, _, entropy, kl, _ = ppo_losses(new, mb, PPOConfig(), Categorical)
    assert entropy.item() == pytest.approx(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25)))
    # KL(old || new) = .5 log(.5/.75) + .5 log(.5/.25) = 0.143841
    assert kl.item() == pytest.approx(0.5 * math.log(0.5 / 0.75) + 0.5 * math.log(2.0))


def test_total_loss_weights_and_kl_penalty() -> None:
    terms = [torch.tensor(x) for x in (1.0, 2.0, 0.5, 0.1)]  # policy, vf, entropy, kl
    cfg = PPOConfig(vf_loss_coeff=0.5, entropy_coeff=0.01)
    assert total_loss(*terms, cfg, kl_coeff=0.0).item() == pytest.approx(1 + 1.0 - 0.005)
    assert total_loss(*terms, cfg, kl_coeff=0.2).item() == pytest.approx(1 + 1.0 - 0.005 + 0.02)


@pytest.mark.parametrize(
    ("coeff", "kl", "expected"),
    [
        (0.2, 0.03, 0.3),  # kl > 2 * target: x1.5
        (0.2, 0.004, 0.1),  # kl < target / 2: x0.5
        (0.2, 0.01, 0.2),  # in between: unchanged
        (0.2, 0.02, 0.2),  # exactly 2 * target: unchanged
        (0.2, 0.005, 0.2),  # exactly target / 2: unchanged
        (0.0, 1.0, 0.0),  # disabled stays disabled
    ],
)
def test_adaptive_kl_coefficient_rule(coeff: float, kl: float, expected: float) -> None:
    assert adapt_kl_coeff(coeff, kl, kl_target=0.01) == pytest.approx(expected)


def test_linear_lr_decays_to_zero_at_the_step_budget() -> None:
    assert linear_lr(1e-3, 0, 100) == pytest.approx(1e-3)
    assert linear_lr(1e-3, 25, 100) == pytest.approx(7.5e-4)
    assert linear_lr(1e-3, 150, 100) == 0.0
    assert linear_lr(1e-3, 150, None) == pytest.approx(1e-3)


# --- distributions vs torch.distributions ----------------------------------------------------


def test_categorical_matches_torch() -> None:
    gen = torch.Generator().manual_seed(0)
    logits_old = torch.randn(64, 5, generator=gen)
    logits_new = torch.randn(64, 5, generator=gen)
    actions = torch.randint(0, 5, (64,), generator=gen)
    ref_old, ref_new = TorchCategorical(logits=logits_old), TorchCategorical(logits=logits_new)
    torch.testing.assert_close(Categorical.logp(logits_old, actions), ref_old.log_prob(actions))
    torch.testing.assert_close(Categorical.entropy(logits_old), ref_old.entropy())
    torch.testing.assert_close(
        Categorical.kl(logits_old, logits_new), kl_divergence(ref_old, ref_new)
    )
    torch.testing.assert_close(Categorical.deterministic(logits_old), logits_old.argmax(-1))


def test_categorical_sampling_frequencies_and_logp() -> None:
    torch.manual_seed(0)
    probs = torch.tensor([0.1, 0.2, 0.7])
    logits = probs.log().expand(40_000, 3)
    actions, logp = Categorical.sample(logits)
    freq = torch.bincount(actions, minlength=3).float() / len(actions)
    torch.testing.assert_close(freq, probs, atol=0.01, rtol=0.0)
    torch.testing.assert_close(logp, probs.log()[actions])


def _gaussian(dist_inputs: torch.Tensor) -> Independent:
    mean, log_std = dist_inputs.chunk(2, dim=-1)
    return Independent(Normal(mean, log_std.exp()), 1)


def test_diag_gaussian_matches_torch() -> None:
    gen = torch.Generator().manual_seed(1)
    old = torch.randn(32, 6, generator=gen)  # action dim 3: mean, log_std
    new = torch.randn(32, 6, generator=gen)
    actions = torch.randn(32, 3, generator=gen)
    torch.testing.assert_close(DiagGaussian.logp(old, actions), _gaussian(old).log_prob(actions))
    torch.testing.assert_close(DiagGaussian.entropy(old), _gaussian(old).entropy())
    torch.testing.assert_close(
        DiagGaussian.kl(old, new), kl_divergence(_gaussian(old), _gaussian(new))
    )
    torch.testing.assert_close(DiagGaussian.deterministic(old), old[:, :3])


def test_diag_gaussian_sampling_moments_and_logp() -> None:
    torch.manual_seed(0)
    dist_inputs = torch.tensor([[1.0, -2.0, math.log(0.5), math.log(2.0)]]).expand(40_000, 4)
    actions, logp = DiagGaussian.sample(dist_inputs)
    torch.testing.assert_close(actions.mean(0), torch.tensor([1.0, -2.0]), atol=0.05, rtol=0)
    torch.testing.assert_close(actions.std(0), torch.tensor([0.5, 2.0]), atol=0.05, rtol=0)
    torch.testing.assert_close(logp, DiagGaussian.logp(dist_inputs, actions))


@pytest.mark.parametrize(("entropy_coeff", "kl_coeff"), [(0.0, 0.0), (0.01, 0.0), (0.0, 0.2)])
def test_zero_weighted_terms_stay_out_of_the_backward_pass(entropy_coeff, kl_coeff) -> None:
    logits = torch.zeros(2, 2, requires_grad=True)
    mb = _batch(logp=[LOG_HALF, LOG_HALF], advantages=[1.0, -1.0])
    cfg = PPOConfig(entropy_coeff=entropy_coeff)
    _, _, entropy, kl, _ = ppo_losses((logits, torch.zeros(2)), mb, cfg, Categorical, kl_coeff)
    assert entropy.requires_grad == (entropy_coeff > 0)
    assert kl.requires_grad == (kl_coeff > 0)

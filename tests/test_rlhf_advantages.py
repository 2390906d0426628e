"""RL's group-relative advantages (training.rlhf.advantages), checked against values worked out by hand: grpo's
standardisation within each group, a group of equal rewards, dr_grpo's mean-only centring and constant loss
normaliser, groups of unequal size (an explored group holds one sample more), and what they refuse."""

import math

import pytest
import torch

from training.rlhf.advantages import STD_EPS, group_advantages, loss_normaliser

# two groups: 1, 2, 3 (mean 2, std 1) and 0, 4 (mean 2, std sqrt(8): Bessel's correction, (4 + 4) / (2 - 1))
REWARD = torch.tensor([1.0, 2.0, 3.0, 0.0, 4.0])
SIZES = [3, 2]


def test_grpo_standardises_each_group_by_its_own_mean_and_std():
    expected = [-1 / (1 + STD_EPS), 0.0, 1 / (1 + STD_EPS), -2 / (math.sqrt(8) + STD_EPS), 2 / (math.sqrt(8) + STD_EPS)]
    assert torch.allclose(group_advantages(REWARD, SIZES, "grpo"), torch.tensor(expected))


def test_dr_grpo_only_subtracts_the_group_mean():
    assert group_advantages(REWARD, SIZES, "dr_grpo").tolist() == [-1.0, 0.0, 1.0, -2.0, 2.0]


def test_a_group_of_equal_rewards_has_no_advantage_and_no_nan():
    reward = torch.tensor([0.75, 0.75, 0.75, 0.75, 1.0, 0.0])  # the first group's std is 0: 0 / (0 + eps), not 0 / 0
    for estimator in ("grpo", "dr_grpo"):
        adv = group_advantages(reward, [4, 2], estimator)
        assert adv[:4].tolist() == [0.0] * 4 and torch.isfinite(adv).all(), estimator


def test_grpo_scales_by_the_spread_and_dr_grpo_does_not():
    """Two groups with the same order but a spread 100 times smaller: grpo gives both +-0.707 (the near-tie
    counts as much as the clear win), dr_grpo keeps the difference in size."""
    reward = torch.tensor([0.0, 0.01, 0.0, 1.0])
    grpo = group_advantages(reward, [2, 2], "grpo")
    assert torch.allclose(grpo, torch.tensor([-1.0, 1.0, -1.0, 1.0]) / math.sqrt(2), atol=0.02)
    assert torch.allclose(group_advantages(reward, [2, 2], "dr_grpo"), torch.tensor([-0.005, 0.005, -0.5, 0.5]))


@pytest.mark.parametrize("estimator", ["grpo", "dr_grpo"])
def test_advantages_are_relative_to_the_group_only(estimator):
    """Each group's advantages sum to 0, and shifting one group's rewards leaves every advantage as it was."""
    adv = group_advantages(REWARD, SIZES, estimator)
    assert abs(adv[:3].sum()) < 1e-6 and abs(adv[3:].sum()) < 1e-6
    shifted = REWARD + torch.tensor([10.0, 10.0, 10.0, 0.0, 0.0])
    assert torch.allclose(group_advantages(shifted, SIZES, estimator), adv)


def test_an_explored_group_of_five_is_its_own_group():
    """Exploration appends its find to a group: 0, 0, 0, 0, 1 (mean 0.2, std sqrt(0.2)) beside a group of four."""
    reward = torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 2.0, 2.0])
    adv = group_advantages(reward, [5, 4], "grpo")
    std = math.sqrt((4 * 0.2**2 + 0.8**2) / 4)
    assert math.isclose(std, math.sqrt(0.2))
    assert torch.allclose(adv[:5], torch.tensor([-0.2] * 4 + [0.8]) / (std + STD_EPS))
    assert torch.allclose(adv[5:], torch.tensor([-0.5, -0.5, 0.5, 0.5]) / (math.sqrt(1 / 3) + STD_EPS))
    assert adv.dtype == reward.dtype and adv.shape == reward.shape


def test_a_group_of_one_has_no_grpo_advantage():
    """torch's std of one value is NaN (Bessel's correction), hence RLConfig's samples_per_prompt >= 2."""
    assert group_advantages(torch.tensor([3.0]), [1], "dr_grpo").tolist() == [0.0]
    with pytest.warns(UserWarning, match="degrees of freedom"):  # torch says so too
        assert torch.isnan(group_advantages(torch.tensor([3.0]), [1], "grpo")).all()


def test_loss_normaliser():
    plans = [3, 5, 2]  # plan tokens per sample
    assert loss_normaliser(plans, "grpo", max_new_tokens=64) == 10  # the batch's plan tokens
    assert loss_normaliser(plans, "dr_grpo", max_new_tokens=64) == 3 * 64  # samples x the token budget
    assert loss_normaliser([60, 1, 1], "dr_grpo", max_new_tokens=64) == 3 * 64  # whatever the plans' lengths


def test_unknown_estimators_and_sizes_that_do_not_fit_are_refused():
    with pytest.raises(ValueError, match="grpo, dr_grpo, got 'ppo'"):
        group_advantages(REWARD, SIZES, "ppo")
    with pytest.raises(ValueError, match="got 'ppo'"):
        loss_normaliser([1], "ppo", max_new_tokens=64)
    with pytest.raises(ValueError, match="sum to 4, but there are 5 rewards"):
        group_advantages(REWARD, [2, 2], "grpo")

"""Campaign YAML loading, command sequences and the scenario matrix (no simulation)."""

import numpy as np
import pytest
import yaml

from sim.campaign.commands import compile_sequence
from sim.campaign.config import CampaignError, campaign_from_dict, load_campaign, resolve_campaign_path
from sim.campaign.matrix import batches, scenarios
from sim.robot import load_robot


@pytest.mark.parametrize("name", ["quick", "full", "terrain"])
def test_shipped_campaigns_load(name):
    cfg = load_campaign(name)
    assert cfg.name == name and cfg.robot is None  # robot-agnostic: the artifact's robot
    jobs = batches(cfg)
    assert sum(len(j.scenarios) for j in jobs) == len(scenarios(cfg))
    assert len({s.id for s in scenarios(cfg)}) == len(scenarios(cfg))
    limits = load_robot("quadruped").command_limits
    for seq in cfg.commands.values():
        cmd = compile_sequence(seq, limits, 0.02, int(cfg.episode_s / 0.02))
        assert np.all(cmd >= limits.low()) and np.all(cmd <= limits.high())


def test_quick_campaign_is_small():
    assert len(scenarios(load_campaign("quick"))) <= 64


def test_batches_group_twin_wide_axes_and_are_deterministic():
    raw = {
        "axes": {"friction": [0.5, 1.0], "obs_noise": [0.0, 1.0], "push_velocity": [0.0, 0.5]},
        "seeds": [0, 1],
        "batch_size": 1,
    }
    cfg = campaign_from_dict(raw)
    jobs = batches(cfg)
    assert len(jobs) == 16
    for j in jobs:
        assert all(
            s.value("obs_noise") == j.obs_noise and s.value("push_velocity") == j.push_velocity for s in j.scenarios
        )
    assert [(j.key, j.twin_seed) for j in jobs] == [(j.key, j.twin_seed) for j in batches(campaign_from_dict(raw))]
    assert len({j.twin_seed for j in jobs}) == len(jobs)


def test_instructions_compile_relative_to_the_robot():
    limits = load_robot("quadruped").command_limits  # vx [-1, 1], vy [-0.5, 0.5], wz [-1, 1]
    cmd = compile_sequence(
        [
            "forward at 0.4 and turn right at 30% for 0.1 s",
            "left",
        ],
        limits,
        0.05,
        4,
    )
    assert cmd.tolist() == [[0.4, 0, -0.3], [0.4, 0, -0.3], [0, 0.25, 0], [0, 0.25, 0]]
    assert compile_sequence([[0.05, 5.0, 0, 0]], limits, 0.05, 2).tolist() == [[1.0, 0, 0]] * 2  # clipped, held


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"axes": {"friction": [0.5]}, "speed": 1}, "unknown key"),
        ({"axes": {"gravity": [1.0]}}, "unknown axis 'gravity'"),
        ({"axes": {"friction": [-1.0]}}, "axes.friction holds an invalid value"),
        ({"axes": {"friction": [1.0, 1.0]}}, "distinct values"),
        ({"axes": {"commands": ["spin"]}}, "command sequence(s) spin not in commands"),
        ({"commands": {"a": ["jump for 1 s"]}}, "cannot read instruction 'jump for 1 s'"),
        ({"gates": {"kpis": {"speed": 1.0}}}, "unknown KPI(s) speed"),
        ({"gates": {"failure_rate": 2}}, "failure rates must lie in [0, 1]"),
        ({"gates": {"per_axis": {"friction": 0.1}}}, "gates.per_axis names axis(es) friction"),
        ({"backend": "bullet"}, "backend 'bullet'"),
        ({"seeds": [1, 1]}, "seeds must be a list of distinct"),
    ],
)
def test_bad_campaigns_fail_with_one_line_naming_the_key(raw, message):
    with pytest.raises(ValueError) as info:
        campaign_from_dict(raw, "c.yaml")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_gates_do_not_change_the_simulation_hash():
    raw = yaml.safe_load(resolve_campaign_path("quick").read_text())
    a = campaign_from_dict(raw)
    raw["gates"]["failure_rate"] = 0.5
    b = campaign_from_dict(raw)
    raw["episode_s"] = 1.0
    c = campaign_from_dict(raw)
    assert a.sim_sha256() == b.sim_sha256() != c.sim_sha256()
    with pytest.raises(CampaignError, match="unknown campaign"):
        load_campaign("nope")

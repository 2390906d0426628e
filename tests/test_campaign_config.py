"""Campaign YAML loading, command sequences and the scenario matrix (no simulation)."""

import numpy as np
import pytest
import yaml

from sim.campaign.commands import compile_sequence
from sim.campaign.config import (
    CampaignError,
    GateConfig,
    campaign_from_dict,
    load_campaign,
    resolve_campaign_path,
)
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


# The results header records sim_sha256 and a resumed run must match it: these are the hashes the shipped
# campaigns had before they loaded through edge.config, so their results stay resumable and comparable.
SHIPPED_SIM_SHA256 = {
    "quick": "d949c3c0526828069be50f364555d38f8430645a0a65999ebc4b048bcccc515b",
    "full": "7c980b1bbfb81cacd675a431536f2b84ea4590228e3016be5fd4f0a2195a7bec",
    "terrain": "1464ae86af557f9f9d1085eeaf7ff4e8d1c7c535743f312190d89cba45be7424",
}


@pytest.mark.parametrize("name", sorted(SHIPPED_SIM_SHA256))
def test_shipped_campaigns_load_to_the_same_simulation(name):
    assert load_campaign(name).sim_sha256() == SHIPPED_SIM_SHA256[name]


def test_quick_campaign_loads_typed_values_in_the_yaml_order():
    cfg = load_campaign("quick")
    assert cfg.axes == {
        "friction": [0.5, 1.0],
        "payload_kg": [0.0, 2.0],
        "motor_strength": [0.8, 1.0],
        "latency_s": [0.0, 0.02],
        "commands": ["forward", "turn"],
    }
    assert all(isinstance(v, float) for v in cfg.axes["payload_kg"])  # 0 and 2 in the YAML
    assert cfg.gates == GateConfig(
        kpis={"falls": 0.0, "tracking_error_lin": 0.35, "tracking_error_ang": 0.6, "peak_torque_ratio": 1.0},
        failure_rate=0.1,
        per_axis={"friction": 0.25},
    )
    assert (cfg.seeds, cfg.batch_size, cfg.runtime, cfg.episode_s) == ((0,), 64, "auto", 4.0)
    bare = campaign_from_dict({}, "runs/c.yaml")  # every default: the first command sequence, no gates
    assert (bare.name, bare.axes, bare.commands, bare.gates) == (
        "c",
        {"commands": ["forward"]},
        {"forward": ["forward"]},
        GateConfig(),
    )


def test_a_campaign_varies_the_payloads_centre_of_mass_and_joint_friction():
    """Every twin parameter is an axis (the identified-twin campaign puts what system identification determined on
    them); a scenario's values reach the twin's per-env parameters."""
    from sim.campaign.rollout import _params

    cfg = campaign_from_dict({"axes": {"payload_com_x": [-0.05, 0.05], "joint_friction": [0.0, 0.2]}}, "c.yaml")
    params = _params(tuple(scenarios(cfg)), 0.004)
    assert sorted(zip(params.payload_com_x, params.joint_friction, strict=True)) == [
        (-0.05, 0.0),
        (-0.05, 0.2),
        (0.05, 0.0),
        (0.05, 0.2),
    ]
    assert not params.payload_com_y.any() and (params.friction == 1.0).all()  # the axes left out: nominal
    with pytest.raises(CampaignError, match="joint_friction"):
        campaign_from_dict({"axes": {"joint_friction": [-0.1]}}, "c.yaml")


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
        ({"axes": {"gravity": [1.0]}}, "c.yaml: axes: unknown key(s) gravity; ScenarioAxes takes friction, "),
        ({"axes": {"friction": [-1.0]}}, "c.yaml: axes: friction must be a positive number, got -1.0"),
        ({"axes": {"friction": [1.0, 1.0]}}, "axes: friction items must be distinct: 1.0 repeated"),
        ({"axes": {"commands": ["spin"]}}, "command sequence(s) spin not in commands"),
        ({"commands": {"a": ["jump for 1 s"]}}, "cannot read instruction 'jump for 1 s'"),
        ({"gates": {"kpis": {"speed": 1.0}}}, "gates.kpis keys must be among tracking_error_lin, "),
        ({"gates": {"kpis": {"speed": 1.0}}}, "unknown KPI(s) speed"),
        ({"gates": {"kpis": {"duty_factor": 0.5}}}, "c.yaml: gates: kpis duty_factor describe the gait"),
        ({"gates": {"failure_rate": 2}}, "c.yaml: gates.failure_rate must be in [0, 1], got 2.0"),
        ({"gates": {"per_axis": {"friction": -0.5}}}, "c.yaml: gates.per_axis must be in [0, 1], got -0.5"),
        ({"gates": {"per_axis": {"friction": 0.1}}}, "gates.per_axis names axis(es) friction"),
        ({"backend": "bullet"}, "c.yaml: backend must be one of mujoco, newton, isaacsim, got 'bullet'"),
        ({"seeds": [1, 1]}, "c.yaml: seeds items must be distinct: 1 repeated"),
        ({"seeds": [-1]}, "c.yaml: seeds must be a non-negative integer, got -1"),
        ({"commands": {}}, "c.yaml: commands must have at least 1 item(s), got {}"),
        ({"episode_s": 0}, "c.yaml: episode_s must be a positive number, got 0.0"),
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

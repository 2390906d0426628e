"""Contact and gait: the foot terms on hand-checkable foot states, the gait KPIs on scripted gaits, foot contacts
from real MuJoCo, the errors for robots and backends without feet, and the campaign's gait KPIs and footfall
diagram for the quadruped."""

import dataclasses
import json

import numpy as np
import pytest
import yaml
from campaign_helpers import export_standing_quadruped

from sim import gait
from sim.campaign.config import load_campaign
from sim.campaign.runner import REPORT_FILE, CampaignRequest, run_campaign
from sim.errors import CampaignError, SimError
from sim.kpis import GAIT_KPIS, RobotLimits, Trajectory, episode_kpis
from sim.randomization import RandomizationConfig
from sim.robot import load_robot
from sim.tasks import RewardTerm, load_task
from sim.tasks.loader import TASK_CONFIG_DIRS
from sim.tasks.terms import REWARDS, FootTracker, TermContext
from sim.twin import BatchedTwin

DT = 0.02
NOMINAL = RandomizationConfig(enabled=False)
QUAD = load_robot("quadruped")


def feet(contact, pos_z=0.02, vel=(0.0, 0.0, 0.0)):
    """One env's backend feet: contact per foot, every foot at height pos_z moving at vel."""
    contact = np.asarray(contact, bool)[None]
    f = contact.shape[1]
    return {
        "contact_force": np.where(contact, 30.0, 0.0),
        "pos": np.broadcast_to(np.array([0.0, 0.0, 1.0]) * pos_z, (1, f, 3)).copy(),
        "vel": np.broadcast_to(np.asarray(vel, float), (1, f, 3)).copy(),
    }


def reward(name, tracker, command=(0.5, 0.0, 0.0), joint_vel=0.0, bend=0.0, **params):
    """The term `name` for one env at the default pose (joints `bend` rad off it) moving its joints at joint_vel."""
    state = {"joint_pos": np.array([QUAD.default_pose]) + bend, "joint_vel": np.full((1, 12), joint_vel)}
    ctx = TermContext(QUAD, state, commands=np.array([command]), torques=np.full((1, 12), 2.0), feet=tracker)
    return float(REWARDS[name](ctx, **params)[0])


def test_a_foot_in_the_air_for_0_3_s_lands_with_its_air_time_less_the_threshold():
    t = FootTracker(1, 4, DT, contact_force_n=1.0)
    t.update(feet([1, 1, 1, 1]))
    rewards = []
    for _ in range(15):  # 0.3 s: the first foot up, swinging to 6 cm
        t.update(feet([0, 1, 1, 1], pos_z=0.06))
        rewards.append(reward("feet_air_time", t, threshold=0.1))
    t.update(feet([1, 1, 1, 1]))
    assert rewards == [0.0] * 15 and t.first_contact.tolist() == [[True, False, False, False]]
    assert reward("feet_air_time", t, threshold=0.1) == pytest.approx(0.3 - 0.1)
    assert reward("feet_air_time", t, command=(0.0, 0.0, 0.0), threshold=0.1) == 0.0  # standing: no reward
    assert reward("feet_height", t, target_height=0.1) == pytest.approx((0.06 / 0.1 - 1) ** 2)
    t.update(feet([1, 1, 1, 1]))
    assert reward("feet_air_time", t, threshold=0.1) == 0.0  # landed once, paid once
    t.reset(np.array([0]))
    assert not t.contact.any() and not t.air_time.any()


def test_slip_is_the_speed_of_the_feet_in_contact_and_clearance_wants_moving_feet_high():
    t = FootTracker(1, 4, DT, contact_force_n=1.0)
    t.update(feet([1, 0, 0, 0], pos_z=0.02, vel=(0.3, 0.4, 0.0)))
    assert reward("feet_slip", t) == pytest.approx(0.5)  # one sliding foot at 0.5 m/s
    assert reward("feet_clearance", t, target_height=0.1) == pytest.approx(4 * 0.08 * np.sqrt(0.5))
    t.update(feet([0, 0, 0, 0], pos_z=0.1, vel=(0.3, 0.4, 0.0)))
    assert reward("feet_slip", t) == 0.0 and reward("feet_clearance", t, target_height=0.1) == pytest.approx(0.0)


def test_pose_stand_still_and_energy():
    t = FootTracker(1, 4, DT, contact_force_n=1.0)
    assert reward("pose", t, joint_weights=(1.0, 1.0, 0.1) * 4) == pytest.approx(1.0)  # at the default pose
    assert reward("stand_still", t, command=(0.0, 0.0, 0.0)) == 0.0  # standing still in its default pose
    assert reward("stand_still", t, command=(0.0, 0.0, 0.0), bend=-0.1) == pytest.approx(1.2)
    assert reward("stand_still", t, command=(0.5, 0.0, 0.0), bend=-0.1) == 0.0  # asked to move
    assert reward("energy", t, joint_vel=-0.5) == pytest.approx(12 * 2.0 * 0.5)


def trot(steps, half=10):
    """A perfect trot: FR+RL down for `half` steps, then FL+RR, and so on (feet FR, FL, RR, RL)."""
    phase = (np.arange(steps) // half) % 2 == 0
    return np.stack([phase, ~phase, ~phase, phase], axis=-1)


def test_gait_kpis_of_scripted_gaits():
    steps, mask = 100, np.ones(100, bool)
    assert gait.trot_index(trot(steps), mask) == pytest.approx(1.0)
    assert gait.duty_factor(trot(steps), mask) == pytest.approx(0.5)
    assert gait.mean_air_time(trot(steps), mask, DT) == pytest.approx(10 * DT)  # only completed flights
    pronk = np.repeat(trot(steps)[:, :1], 4, axis=1)
    assert gait.trot_index(pronk, mask) == 0.0
    bound = np.stack([trot(steps)[:, 0]] * 2 + [~trot(steps)[:, 0]] * 2, axis=-1)  # front pair, rear pair
    assert gait.trot_index(bound, mask) == 0.0
    cut = np.arange(steps) < 50  # a fall at step 50: what follows is not scored
    assert gait.duty_factor(trot(steps), cut) == pytest.approx(0.5)
    standing = np.ones((steps, 4), bool)
    assert gait.mean_air_time(standing, mask, DT) == 0.0 and gait.trot_index(standing, mask) == 0.0


def test_episode_kpis_score_slip_and_cost_of_transport():
    steps, feet_n, joints = 50, 4, 2
    contact = np.stack([trot(steps), trot(steps)])  # two episodes
    speed = np.where(contact, 0.05, 1.0)  # feet slide at 5 cm/s in stance
    commands = np.zeros((2, steps, 3))
    commands[0, :, 0] = 0.5  # episode 0 walks at 0.5 m/s; episode 1 is told to stand
    traj = Trajectory(
        dt=DT,
        commands=commands,
        base_lin_vel=np.tile([0.5, 0.0, 0.0], (2, steps, 1)),
        base_ang_vel=np.zeros((2, steps, 3)),
        projected_gravity=np.tile([0.0, 0.0, -1.0], (2, steps, 1)),
        joint_pos=np.zeros((2, steps, joints)),
        joint_vel=np.ones((2, steps, joints)),
        torques=np.full((2, steps, joints), 3.0),
        foot_contact=contact,
        foot_speed=speed,
    )
    limits = RobotLimits(np.full(joints, -np.inf), np.full(joints, np.inf), np.full(joints, 10.0), 1.0, 0.1, 12.0)
    k = episode_kpis(traj, limits, settle_s=0.0)
    assert set(GAIT_KPIS) <= set(k) and contact.shape[-1] == feet_n
    np.testing.assert_allclose(k["foot_slip_m_s"], [0.05, 0.05])
    np.testing.assert_allclose(k["trot_index"], [1.0, 1.0])
    power, distance = 2 * 3.0 * 1.0, 0.5 * steps * DT  # W, m
    cot = power * steps * DT / (12.0 * gait.GRAVITY * distance)
    np.testing.assert_allclose(k["cost_of_transport"], [cot, 0.0])  # no motion command: nothing transported


def test_contacts_from_mujoco_standing_and_lifted():
    twin = BatchedTwin(QUAD, num_envs=2, seed=0, randomization=NOMINAL)
    twin.reset()
    for _ in range(25):  # 0.5 s holding the default pose: it drops onto its feet
        twin.step(np.zeros((2, 12)))
    assert twin.feet.contact.all()
    force = twin.backend.feet()["contact_force"]
    assert force.sum(axis=1) == pytest.approx([twin.backend.base_model.body_mass.sum() * 9.81] * 2, rel=0.15)
    s = twin.backend.state()
    lifted = s["base_pos"].copy()
    lifted[:, 2] = 1.0
    twin.backend.set_state(
        np.arange(2), lifted, s["base_quat"], np.zeros((2, 3)), np.zeros((2, 3)), s["joint_pos"], s["joint_vel"]
    )
    feet_now = twin.backend.feet()  # recomputed for the state just set, before any step
    assert not (feet_now["contact_force"] > 0).any() and feet_now["pos"][:, :, 2].min() > 0.5
    twin.step(np.zeros((2, 12)))
    assert not twin.feet.contact.any() and twin.feet.air_time.tolist() == [[DT] * 4] * 2
    twin.close()


def test_robots_and_backends_without_feet_are_refused_with_one_line():
    rover = load_robot("rover")
    task = load_task(rover)
    with_feet = dataclasses.replace(task, rewards={**task.rewards, "feet_slip": RewardTerm(REWARDS["feet_slip"], -0.1)})
    with pytest.raises(SimError, match=r"rewards feet_slip need feet, and robot 'rover' names none"):
        BatchedTwin(rover, num_envs=1, task=with_feet)
    with pytest.raises(SimError, match=r"the newton backend senses no feet.*gait_phase_contact, feet_slip"):
        BatchedTwin(QUAD, num_envs=1, backend="newton")  # refused before Newton is imported
    assert not load_task(QUAD).without_foot_terms().foot_terms
    assert BatchedTwin(rover, num_envs=1).feet is None  # no feet: nothing tracked


def test_descriptive_gait_kpis_cannot_be_gated(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**CAMPAIGN, "gates": {"kpis": {"trot_index": 0.7}}}))
    with pytest.raises(CampaignError, match="trot_index describe the gait"):
        load_campaign(path)


CAMPAIGN = {
    "name": "quadruped-gait",
    "robot": "quadruped",
    "episode_s": 1.0,
    "seeds": [0],
    "settle_s": 0.25,
    "axes": {"commands": ["forward", "stand"]},
    "commands": {"forward": ["forward"], "stand": ["stop"]},
    "gates": {"kpis": {"falls": 0, "foot_slip_m_s": 0.1}, "failure_rate": 1.0},
}


def test_campaign_scores_the_gait_and_reports_the_footfalls(tmp_path):
    artifact = export_standing_quadruped(tmp_path / "standing")
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(CAMPAIGN))
    out = run_campaign(CampaignRequest(artifact, load_campaign(path), tmp_path / "out", promote_verdict=False))
    rows = [json.loads(line) for line in (out.out_dir / "results.jsonl").read_text().splitlines()[1:]]
    for row in rows:  # it stands on four feet: all stance, no flight, no trot
        assert set(GAIT_KPIS) <= set(row["kpis"])
        assert row["kpis"]["duty_factor"] == pytest.approx(1.0, abs=0.05)
        assert row["kpis"]["mean_air_time_s"] == 0.0 and row["kpis"]["trot_index"] == 0.0
    assert set(GAIT_KPIS) <= set(out.summary["kpis"])
    report = (out.out_dir / REPORT_FILE).read_text()
    assert f'alt="footfall diagram: {out.summary["worst_cases"][0]["id"]}"' in report


def test_a_snapshot_carries_the_foot_state():
    twin = BatchedTwin(QUAD, num_envs=2, seed=3, task=TASK_CONFIG_DIRS[0] / "velocity_quadruped_air_time.yaml")
    twin.reset()
    rng = np.random.default_rng(0)
    for _ in range(20):
        twin.step(rng.uniform(-1, 1, (2, 12)))
    snapshot, actions = twin.state_dict(), rng.uniform(-1, 1, (15, 2, 12))

    def rollout():
        return [twin.step(a)[4]["reward_terms"]["feet_air_time"] for a in actions]

    first = rollout()
    assert np.any(first)  # feet landed: the rewards depend on the air time before the snapshot
    twin.load_state_dict(snapshot)
    np.testing.assert_array_equal(rollout(), first)
    twin.close()

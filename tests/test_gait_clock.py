"""The gait clock (issue 35): the gait_phase observation in the twin (real MuJoCo) and on the robot's side
(policy_node's controller on a real ONNX artifact, real messages, no DDS), the trot's diagonal pairs read from the
MJCF, the swing/stance reward on hand-made foot patterns, and the robots the clock refuses."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from sensor_msgs.msg import Imu, JointState

from edge.observation import GAIT_HZ
from edge.runtime import load_policy
from sim.errors import SimError
from sim.randomization import RandomizationConfig
from sim.robot import load_robot
from sim.symmetry import diagonal_pairs, trot_offsets
from sim.tasks import load_task
from sim.tasks.config import check_task
from sim.tasks.loader import TASK_CONFIG_DIRS
from sim.tasks.terms import REWARDS, FootTracker, TermContext
from sim.twin import BatchedTwin

AIR_TIME_TASK = TASK_CONFIG_DIRS[0] / "velocity_quadruped_air_time.yaml"  # the option without the clock
QUAD = load_robot("quadruped")
DT = QUAD.control_dt
PERIOD_STEPS = 25  # 2 Hz at 50 Hz
REST = 0.022  # a foot sphere's centre, resting on the floor


def clock_twin(commands) -> BatchedTwin:
    twin = BatchedTwin(QUAD, num_envs=len(commands), randomization=RandomizationConfig(enabled=False))
    twin.hold_commands().reset(seed=0)
    twin.set_commands(np.array(commands, dtype=float))
    return twin


def phase_columns(twin: BatchedTwin) -> slice:
    start = 0
    for term in twin.task.layout.terms:
        if term.name == "gait_phase":
            assert term.scale == (1.0, 1.0)  # the observation holds the clock itself
            return slice(start, start + term.size)
        start += term.size
    raise AssertionError("the task does not observe gait_phase")


def test_the_quadrupeds_task_observes_gait_phase_and_rewards_the_clock_in_place_of_air_time():
    task = load_task(QUAD)
    assert list(task.observations)[-1] == "gait_phase" and len(task.obs_terms(12)) == 8
    assert task.rewards["gait_phase_contact"].weight == 2.0 and "feet_air_time" not in task.rewards
    assert "gait_phase_contact" in task.foot_terms
    air_time = load_task(QUAD, AIR_TIME_TASK)  # the option: legged_gym's air-time terms, no clock
    assert "gait_phase" not in air_time.observations and "gait_phase_contact" not in air_time.rewards
    assert air_time.rewards["feet_air_time"].weight == 2.0


def test_the_twins_gait_phase_turns_at_2_hz_and_is_zero_at_a_zero_command():
    twin = clock_twin([(0.5, 0.0, 0.0), (0.0, 0.0, 0.0)])
    cols = phase_columns(twin)
    seen = [twin.observations[:, cols]]
    for _ in range(PERIOD_STEPS):
        obs, *_ = twin.step(np.zeros((2, 12)))
        seen.append(obs[:, cols])
    seen = np.array(seen)  # (steps + 1, envs, 2)
    angle = 2 * np.pi * GAIT_HZ * DT * np.arange(PERIOD_STEPS + 1)
    assert np.allclose(seen[:, 0], np.stack([np.sin(angle), np.cos(angle)], axis=1), atol=1e-6)
    assert np.allclose(seen[0, 0], seen[PERIOD_STEPS, 0], atol=1e-6)  # one period is 0.5 s, 25 steps
    assert not seen[:, 1].any()  # told to stand: the clock is hidden
    twin.set_commands(np.array([0.0, 0.3, 0.0]), env_ids=np.array([1]))  # a command shows it, at the episode's time
    assert np.allclose(twin.observations[1, cols], seen[-1, 0], atol=1e-6)
    obs, _ = twin.reset()  # a new episode starts its clock at 0
    assert np.allclose(obs[:, cols], [[0.0, 1.0], [0.0, 1.0]])


def test_ppo_trains_on_the_clock_task_with_the_mirror(tmp_path):
    from training.ppo.config import PPOConfig
    from training.ppo.runner import PPORunner

    cfg = PPOConfig.for_robot(
        "quadruped", num_envs=16, num_steps_per_env=8, iterations=1, eval_every=0, run_root=str(tmp_path),
        export=False, symmetry_augmentation=True,
    )  # fmt: skip
    runner = PPORunner(cfg, tmp_path / "run")
    try:
        assert runner.env.twin.task.obs_dim == 50  # 48 + the clock
        runner.collect()
        losses = runner._update()
    finally:
        runner.close()
    assert np.isfinite(losses["symmetry"])


# ------------------------------------------------------------------------------------------ the robot's side
def joint_states(sec: int, nanosec: int) -> JointState:
    msg = JointState(name=list(QUAD.joints), position=list(QUAD.default_pose), velocity=[0.0] * 12)
    msg.header.stamp.sec, msg.header.stamp.nanosec = sec, nanosec
    return msg


def imu() -> Imu:
    msg = Imu()
    msg.orientation.w = 1.0
    return msg


def twist(vx: float) -> Twist:
    msg = Twist()
    msg.linear.x = vx
    return msg


def random_artifact(task: Path | None, out: Path) -> Path:
    """A randomly initialised quadruped policy exported with `task`'s observation layout (None: its own task's)."""
    from benchmarks.edge_policies import HIDDEN, random_actor
    from edge.manifest import ActionLimits
    from sim.robot import joint_target_limits
    from training.export import export_policy

    terms = load_task(QUAD, task).obs_terms(QUAD.num_actions)
    actor = random_actor(sum(t.size for t in terms), QUAD.num_actions, HIDDEN["quadruped"])
    limits = ActionLimits(joint_target_limits(QUAD), 10.0)
    export_policy(actor, QUAD.to_dict(), terms, out, run_id="random", limits=limits)
    return out


@pytest.fixture(scope="module")
def clock_artifact(tmp_path_factory):
    return random_artifact(None, tmp_path_factory.mktemp("artifact") / "policy")


def test_policy_node_feeds_a_clocked_policy_the_twins_clock_step_for_step(clock_artifact):
    from ros_nodes.controller import PolicyController

    control = PolicyController(load_policy(clock_artifact, "onnxruntime"), 0.1, 0.5, [0.0, 0.0, 0.0])
    assert control.clocked and control.control_period == pytest.approx(DT)
    twin = clock_twin([(0.5, 0.0, 0.0)])
    cols = phase_columns(twin)
    reference = load_policy(clock_artifact, "onnxruntime")
    control.inputs.cmd_vel(twist(0.5), 0.0)
    for k in range(PERIOD_STEPS + 3):
        now = k * DT
        control.inputs.joint_states(joint_states(0, int(now * 1e9)), now)
        control.inputs.imu(imu(), now)
        control.inputs.odom(Odometry(), now)
        control.inputs.cmd_vel(twist(0.5), now)
        values = control.inputs.observation_values(now, 0.5, control.last_action, control.clock_s)
        assert np.allclose(values["gait_phase"], twin.observations[0, cols], atol=1e-6), k
        targets, fault = control.step(now)
        assert fault is None
        expected = control.offset + control.scale * reference.act(control.layout.assemble(values))
        assert np.allclose(targets, expected, atol=1e-5)  # the policy acted on that observation
        twin.step(np.zeros((1, 12)))
    assert control.steps == PERIOD_STEPS + 3
    control.inputs.cmd_vel(twist(0.0), now)  # told to stop: the clock is hidden, and keeps counting
    assert not control.inputs.observation_values(now, 0.5, control.last_action, control.clock_s)["gait_phase"].any()
    control.estop = True  # a fault restarts the clock, as a twin's reset does
    assert control.step(now)[1] is not None and control.clock_s == 0.0


# ------------------------------------------------------------------------------------------ the trot
def test_the_quadrupeds_diagonal_pairs_come_from_its_feet_positions():
    pairs = [tuple(QUAD.feet[i] for i in pair) for pair in diagonal_pairs(QUAD)]
    assert pairs == [("FR_foot", "RL_foot"), ("FL_foot", "RR_foot")]
    assert trot_offsets(QUAD).tolist() == [0.0, 0.5, 0.5, 0.0]  # FR, FL, RR, RL
    shuffled = dataclasses.replace(QUAD, feet=("RL_foot", "FL_foot", "FR_foot", "RR_foot"))  # any YAML order
    assert [tuple(shuffled.feet[i] for i in pair) for pair in diagonal_pairs(shuffled)] == pairs


def backend_feet(swing: np.ndarray, stance_slip: float = 0.0) -> dict[str, np.ndarray]:
    """One env's backend feet: those of `swing` [4] in the air at the swing height, the others on the floor, sliding at
    stance_slip m/s."""
    pos = np.zeros((1, 4, 3))
    pos[0, :, 2] = np.where(swing, 0.08, REST)
    vel = np.zeros((1, 4, 3))
    vel[0, ~swing, 0] = stance_slip
    return {"contact_force": np.where(swing, 0.0, 30.0)[None], "pos": pos, "vel": vel}


def clock_reward(pattern, command=(0.5, 0.0, 0.0), stance_slip=0.0) -> float:
    """gait_phase_contact averaged over one clock period; pattern(k) -> [4] bool, the feet in the air at step k."""
    tracker = FootTracker(1, 4, DT, contact_force_n=1.0)
    state = {"joint_pos": np.array([QUAD.default_pose]), "joint_vel": np.zeros((1, 12))}
    total = 0.0
    for k in range(PERIOD_STEPS):
        tracker.update(backend_feet(np.asarray(pattern(k), bool), stance_slip))
        ctx = TermContext(QUAD, state, commands=np.array([command]), feet=tracker, episode_time=np.array([k * DT]))
        total += float(REWARDS["gait_phase_contact"](ctx)[0])
    return total / PERIOD_STEPS


def on_clock(k: int) -> np.ndarray:
    """Each foot in the air in its swing half: sin(2 pi (f t + offset)) > 0."""
    return np.sin(2 * np.pi * (GAIT_HZ * k * DT + trot_offsets(QUAD))) > 0


def test_feet_that_follow_the_clock_earn_more_than_feet_that_do_not():
    follow = clock_reward(on_clock)
    assert follow > 0.8
    assert follow > clock_reward(lambda k: ~on_clock(k)) + 0.5  # the trot half a period late
    assert follow > clock_reward(lambda k: np.zeros(4, bool)) + 0.3  # standing
    assert follow > clock_reward(lambda k: np.repeat(on_clock(k)[:1], 4)) + 0.3  # pronking on the first pair's clock
    bound = lambda k: on_clock(k)[[0, 0, 1, 1]]  # noqa: E731  (front pair together, rear pair together)
    assert follow > clock_reward(bound) + 0.3
    assert follow > clock_reward(on_clock, stance_slip=0.3) + 0.2  # sliding in stance costs
    assert clock_reward(on_clock, command=(0.0, 0.0, 0.0)) == 0.0  # told to stand: no clock, no reward


def test_a_robot_without_four_feet_in_diagonal_pairs_is_refused_in_one_line(tmp_path):
    clock_task = tmp_path / "clock.yaml"  # a task that weights the clock's reward whatever the robot
    clock_task.write_text("rewards:\n  gait_phase_contact: {weight: 2.0}\n")
    two = dataclasses.replace(QUAD, feet=("FR_foot", "FL_foot"))
    with pytest.raises(SimError) as e:
        load_task(two, clock_task)
    assert str(e.value).startswith(f"{clock_task}: rewards.gait_phase_contact: robot 'quadruped': the gait clock ")
    assert "its YAML lists 2 feet (FR_foot, FL_foot)" in str(e.value) and "\n" not in str(e.value)
    # four feet, one behind the other on the centre line: no left and right, no diagonals
    legs = "".join(
        f'<body name="leg{i}" pos="{x} 0 0"><joint name="j{i}" axis="0 1 0"/>'
        f'<geom name="foot{i}" type="sphere" size=".02" pos="0 0 -0.2"/></body>'
        for i, x in enumerate((0.3, 0.1, -0.1, -0.3))
    )
    (tmp_path / "caterpillar.xml").write_text(
        f'<mujoco><worldbody><body name="base" pos="0 0 0.3"><freejoint/><geom type="box" size=".35 .05 .05"/>'
        f"{legs}</body></worldbody></mujoco>"
    )
    (tmp_path / "caterpillar.yaml").write_text(
        "name: caterpillar\nmjcf: caterpillar.xml\nbase_body: base\njoints: [j0, j1, j2, j3]\n"
        "default_pose: [0.0, 0.0, 0.0, 0.0]\nkp: 10.0\nkd: 1.0\ntorque_limit: 5.0\n"
        "feet: [foot0, foot1, foot2, foot3]\n"
    )
    caterpillar = load_robot(tmp_path / "caterpillar.yaml")
    with pytest.raises(SimError, match=r"^\S+: rewards.gait_phase_contact: robot 'caterpillar': .*front feet foot\d "
                       r"and foot\d are not side by side in y$"):  # fmt: skip
        load_task(caterpillar, clock_task)
    rover = load_robot("rover")  # no feet at all: the foot terms' refusal comes first
    cfg = load_task(QUAD)
    with pytest.raises(SimError, match=r"gait_phase_contact, feet_slip need feet, and robot 'rover' names none"):
        check_task(dataclasses.replace(load_task(rover), rewards=cfg.rewards), rover, "task")
    for robot in (two, caterpillar):  # their default task gives them the air-time term instead
        assert "feet_air_time" in load_task(robot).rewards and "gait_phase" not in load_task(robot).observations


def test_a_campaign_judges_a_policy_without_the_clock_with_its_own_observation_layout(tmp_path):
    """The robot's own task observes the clock; the campaign's twin observes what the artifact observes."""
    from sim.campaign.config import campaign_from_dict
    from sim.campaign.runner import CampaignRequest, run_campaign

    artifact = random_artifact(AIR_TIME_TASK, tmp_path / "policy")
    campaign = campaign_from_dict(
        {
            "name": "clock",
            "robot": "quadruped",
            "episode_s": 0.5,
            "seeds": [0],
            "settle_s": 0.1,
            "axes": {"commands": ["forward"]},
            "commands": {"forward": ["forward"]},
            "gates": {"kpis": {"falls": 1}, "failure_rate": 1.0},
        },
        "clock.yaml",
    )
    assert "gait_phase" in load_task(QUAD).observations
    outcome = run_campaign(CampaignRequest(artifact, campaign, tmp_path / "out", promote_verdict=False))
    assert outcome.summary["episodes"] == 1 and outcome.env_steps > 0

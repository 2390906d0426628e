"""The batched MuJoCo twin: shapes, auto-reset, determinism, randomisation, physical sanity, bad input, and the
rewards and observations pinned to what the twin gave before the task had its own config."""

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from sim.controllers import DiffDriveController, StandController
from sim.randomization import PhysicsParams, RandomizationConfig, Rehearsal, fixed_params, sample_params
from sim.robot import load_robot
from sim.tasks import default_task, load_task
from sim.twin import BatchedTwin

NOMINAL = RandomizationConfig(enabled=False)


@pytest.fixture(params=["rover", "quadruped"])
def robot(request):
    return request.param


def test_shapes_and_spaces(robot):
    twin = BatchedTwin(robot, num_envs=8, seed=0)
    obs, _ = twin.reset()
    nu = twin.spec.num_actions
    assert obs.shape == (8, twin.task.obs_dim) and obs.dtype == np.float32
    assert twin.observation_space.shape == (8, twin.task.obs_dim)
    assert twin.action_space.shape == (8, nu)
    obs, rew, term, trunc, info = twin.step(np.zeros((8, nu)))
    assert obs.shape == (8, twin.task.obs_dim) and rew.shape == (8,) and term.shape == trunc.shape == (8,)
    assert set(info["reward_terms"]) >= {"tracking_lin_vel", "tracking_ang_vel", "action_rate"}
    assert all(v.shape == (8,) for v in info["reward_terms"].values())
    # the sum of the terms, clipped at 0 before the fall term for a robot with feet (only_positive_rewards)
    assert np.allclose(rew, twin.task.cfg.total_reward(info["reward_terms"]), atol=1e-6)
    twin.close()


# Computed by the twin before the robot/task split (commit 114cb75): BatchedTwin(robot, num_envs=2, seed=0), five
# steps of np.random.default_rng(0).uniform(-1, 1) actions, randomisation on. Terms: weight * control_dt included.
PINNED = {
    "quadruped": {
        "terms": {
            "tracking_lin_vel": [0.0036533829136243907, 0.0010134074006618022],
            "tracking_ang_vel": [0.008339385396276202, 0.0002461482723950802],
            "lin_vel_z": [-0.0011026771994797314, -0.0038096613119210977],
            "orientation": [-3.475503409191936e-05, -2.0432379014023813e-05],
            "torques": [-0.00012558278167333473, -9.499833581981671e-06],
            "joint_acc": [-0.0006295696077376473, -0.004567363406994286],
            "action_rate": [-0.0012040419381119413, -0.0034882367437468398],
        },
        "reward": [0.008833125233650208, -0.013522975146770477],
        # env 0: base_lin_vel, base_ang_vel, projected_gravity, velocity_command (scaled, with noise)
        "obs": [
            -0.1505870670080185,
            0.15211139619350433,
            -0.1846933811903,
            -0.01941175013780594,
            -0.06194307282567024,
            0.14441204071044922,
            -0.019429728388786316,
            -0.03400084376335144,
            -1.0210436582565308,
            1.1483932733535767,
            -0.5212610960006714,
            0.1882421225309372,
        ],
        "commands": [
            [0.5741966149773667, -0.26063055700704785, 0.7529684616214076],
            [-0.8828639303896113, -0.16388293945433963, -0.6994410662103219],
        ],
    },
    "rover": {
        "terms": {
            "tracking_lin_vel": [0.0005998802672918252, 0.01099682672523625],
            "tracking_ang_vel": [0.00018119843601170055, 0.008643625742485546],
            "ang_vel_xy": [-0.00015039585300553816, -3.2517600275289525e-05],
            "torques": [-3.4998354546185767e-06, -1.574429742762292e-05],
            "joint_acc": [-0.00020970629868326444, -0.0014063570080889852],
            "action_rate": [-0.00020637681380846856, -0.00019670085835689198],
        },
        "reward": [0.0002078683173749596, 0.017887435853481293],
        "obs": [
            0.3090064227581024,
            0.03792430832982063,
            -0.17994162440299988,
            -0.033431269228458405,
            -0.02777576632797718,
            -0.10219214856624603,
            -0.015390915796160698,
            -0.029995959252119064,
            -0.9827430844306946,
            1.9888397455215454,
            0.0,
            0.1391564905643463,
        ],
        "commands": [[0.994419871578422, 0.0, 0.5566259534420839], [0.3009185525356326, 0.0, -0.33323572806268853]],
    },
}


def test_rewards_observations_and_commands_match_the_pinned_values(robot):
    # pinned with legged_gym's rewards and observations (default_task without its gait terms, gait clock and reward
    # clip), which the quadruped's task YAML held before it had them
    spec = load_robot(robot)
    rewards = default_task(spec).without_foot_terms().rewards
    task = load_task(spec)
    observations = {name: term for name, term in task.observations.items() if name != "gait_phase"}
    task = dataclasses.replace(task, rewards=rewards, observations=observations, only_positive_rewards=False)
    twin = BatchedTwin(spec, num_envs=2, seed=0, task=task)
    twin.reset()
    rng = np.random.default_rng(0)
    for _ in range(5):
        obs, rew, _, _, info = twin.step(rng.uniform(-1, 1, (2, twin.spec.num_actions)))
    pinned = PINNED[robot]
    assert list(info["reward_terms"]) == [  # the order they are summed in
        "tracking_lin_vel",
        "tracking_ang_vel",
        "lin_vel_z",
        "ang_vel_xy",
        "orientation",
        "torques",
        "joint_acc",
        "action_rate",
        "termination",
    ]
    for name, values in pinned["terms"].items():
        np.testing.assert_allclose(info["reward_terms"][name], values, rtol=1e-9, err_msg=name)
    np.testing.assert_allclose(rew, pinned["reward"], rtol=1e-6)  # float32
    np.testing.assert_allclose(obs[0, :12], pinned["obs"], rtol=1e-6)
    np.testing.assert_allclose(twin.commands, pinned["commands"], rtol=1e-12)
    twin.close()


def test_obs_dims_follow_the_manifest_layout():
    assert BatchedTwin("quadruped", num_envs=1).task.obs_dim == 50  # legged_gym's flat-terrain layout + the clock
    assert BatchedTwin("rover", num_envs=1).task.obs_dim == 16  # no joint positions for wheels


def test_seeded_runs_are_identical_and_seeds_differ(robot):
    def run(seed):
        twin = BatchedTwin(robot, num_envs=4, seed=seed)
        obs, _ = twin.reset(seed=seed)
        rng = np.random.default_rng(1)
        trace = [obs]
        for _ in range(30):
            obs, *_ = twin.step(rng.uniform(-1, 1, (4, twin.spec.num_actions)))
            trace.append(obs)
        twin.close()
        return np.stack(trace)

    a, b, c = run(3), run(3), run(4)
    assert np.array_equal(a, b)
    assert not np.allclose(a, c)


def test_timeout_truncates_and_autoresets_in_the_same_step():
    twin = BatchedTwin("rover", num_envs=3, seed=0, randomization=NOMINAL)
    twin.reset()
    twin.max_episode_steps = 5
    for _ in range(4):
        _, _, term, trunc, _ = twin.step(np.zeros((3, 2)))
        assert not trunc.any()
    obs, _, term, trunc, info = twin.step(np.zeros((3, 2)))
    assert trunc.all() and not term.any()
    assert info["_final_obs"].all() and info["final_obs"].shape == obs.shape
    assert np.array_equal(info["episode"]["l"], [5, 5, 5])
    assert (twin.episode_length == 0).all()


def test_fall_terminates_and_resets_only_that_env():
    twin = BatchedTwin("quadruped", num_envs=2, seed=0, randomization=NOMINAL)
    twin.reset()
    state = twin.backend.state()
    low = state["base_pos"][:1].copy()
    low[:, 2] = 0.05  # below min_base_height
    twin.backend.set_state(
        np.array([0]),
        low,
        state["base_quat"][:1],
        state["base_lin_vel"][:1],
        state["base_ang_vel"][:1],
        state["joint_pos"][:1],
        state["joint_vel"][:1],
    )
    _, rew, term, trunc, info = twin.step(np.zeros((2, 12)))
    assert term.tolist() == [True, False]
    assert info["episode"]["env_ids"].tolist() == [0]
    weight = twin.task.weights["termination"]
    assert info["reward_terms"]["termination"][0] == pytest.approx(weight * twin.spec.control_dt)  # weight * dt
    assert info["reward_terms"]["termination"][1] == 0
    assert twin.backend.state()["base_pos"][0, 2] == pytest.approx(twin.spec.base_height)


def test_randomisation_stays_in_its_ranges():
    spec = load_robot("quadruped")
    cfg = load_task(spec).randomization
    params = sample_params(cfg, 2000, spec.sim_dt, np.random.default_rng(0))
    for name in ("friction", "payload_kg", "motor_strength", "kp_scale", "kd_scale"):
        lo, hi = getattr(cfg, name)
        values = getattr(params, name)
        assert values.min() >= lo and values.max() <= hi, name
        assert values.max() - values.min() > 0.8 * (hi - lo), name  # the range is actually used
    assert params.latency_steps.min() >= 0 and params.latency_steps.max() <= round(cfg.latency_s[1] / spec.sim_dt)

    twin = BatchedTwin(spec, num_envs=16, seed=0)
    twin.reset()
    models = [twin.backend.model(i) for i in range(twin.num_envs)]
    base = models[0].body(spec.base_body).id
    masses = np.array([m.body_mass[base] for m in models])
    frictions = np.array([m.geom_friction[0, 0] for m in models])
    nominal_mass = twin.backend.base_model.body_mass[base]
    assert np.allclose(masses - nominal_mass, twin.params.payload_kg)
    assert np.allclose(frictions, twin.params.friction)
    assert len(np.unique(frictions)) == 16


def test_rehearsing_envs_draw_their_physics_from_the_twin_as_trained():
    """A fine-tuning's twin: the first quarter of its envs keep the nominal physics, the others draw the new ranges,
    at every reset; the delay history is long enough for both."""
    identified = RandomizationConfig.from_dict({"payload_kg": [2.0, 3.0], "latency_s": [0.0, 0.0]})
    rehearsed = RandomizationConfig.from_dict({"payload_kg": [0.0, 0.0], "latency_s": [0.06, 0.06]})
    twin = BatchedTwin("rover", num_envs=8, seed=0, randomization=Rehearsal(identified, rehearsed, 0.25))
    for _ in range(2):
        twin.reset()
        assert (twin.params.payload_kg[:2] == 0.0).all() and (twin.params.latency_steps[:2] > 0).all()
        assert ((twin.params.payload_kg[2:] >= 2.0) & (twin.params.payload_kg[2:] <= 3.0)).all()
        assert (twin.params.latency_steps[2:] == 0).all()
    assert twin._history_len * twin.spec.physics_steps > twin.params.latency_steps.max()
    twin.step(np.zeros((8, twin.spec.num_actions)))  # the rehearsing envs' delay fits the history


def test_randomisation_yaml_errors_are_named():
    with pytest.raises(ValueError, match="friction"):
        RandomizationConfig.from_dict({"friction": [1.0, 0.5]})
    with pytest.raises(ValueError, match=r"randomization: unknown key\(s\) gravity; RandomizationConfig takes"):
        RandomizationConfig.from_dict({"gravity": [0, 1]})


def test_latency_delays_the_response_by_whole_physics_steps():
    def knee_after_step(latency_steps, action):
        twin = BatchedTwin("quadruped", num_envs=1, seed=0, randomization=NOMINAL)
        twin.reset()
        params = PhysicsParams.nominal(1)
        params.latency_steps[:] = latency_steps
        twin.set_params(params)
        for _ in range(10):
            twin.step(np.zeros((1, 12)))
        twin.step(np.full((1, 12), action))
        return twin.backend.state()["joint_pos"][0, 2]

    # effect of a step in the target within the same env-step (4 physics steps), against holding still
    effect = {lat: knee_after_step(lat, 2.0) - knee_after_step(lat, 0.0) for lat in (0, 3, 4)}
    assert abs(effect[0]) > 3 * abs(effect[3]) > 0
    assert effect[4] == 0.0  # a full env-step of delay: the new target has not reached the motor yet


def lagging_rover(lag_s: float, latency_s: float = 0.0) -> BatchedTwin:
    twin = BatchedTwin("rover", num_envs=1, seed=0, randomization=NOMINAL)
    twin.reset()
    twin.set_params(fixed_params({"motor_lag_s": lag_s, "latency_s": latency_s}, twin.spec.physics_dt))
    return twin


def test_the_drives_follow_their_targets_through_a_first_order_lag():
    """Each physics step moves what a drive applies 1 - exp(-dt / motor_lag_s) of the way to its target, so the
    wheels spin up later; a snapshot carries the lag's state."""

    def spin_up(lag_s: float) -> tuple[np.ndarray, np.ndarray]:
        twin = lagging_rover(lag_s)
        applied, speed = [], []
        for _ in range(3):
            twin.step(np.ones((1, twin.spec.num_actions)))
            applied.append(twin.state_dict()["arrays"]["drive_targets"][0])
            speed.append(twin.backend.state()["joint_vel"][0])
        return np.array(applied), np.array(speed)

    spec = load_robot("rover")
    target = spec.action_scale  # a velocity robot's target for action 1
    lagged, slow = spin_up(spec.control_dt)  # one time constant per control period
    expected = target * (1 - np.exp(-np.arange(1, 4)))[:, None]
    np.testing.assert_allclose(lagged, np.broadcast_to(expected, lagged.shape), rtol=1e-12)
    instant, fast = spin_up(0.0)
    np.testing.assert_allclose(instant, target)
    assert np.all(np.abs(slow[0]) < 0.6 * np.abs(fast[0]))  # the first control period's spin-up

    twin = lagging_rover(spec.control_dt)
    twin.step(np.ones((1, spec.num_actions)))
    snapshot = twin.state_dict()
    after = [twin.step(np.ones((1, spec.num_actions)))[0] for _ in range(3)]
    twin.load_state_dict(snapshot)
    np.testing.assert_array_equal(after, [twin.step(np.ones((1, spec.num_actions)))[0] for _ in range(3)])


def test_settled_drives_are_where_stepping_the_history_leaves_them():
    """A state set from a log: settle_drives brings the lag to where the twin that issued the targets in the
    history, delay included, had it."""
    spec = load_robot("rover")
    stepped = lagging_rover(spec.control_dt, latency_s=2 * spec.physics_dt)
    for _ in range(2):
        stepped.step(np.ones((1, spec.num_actions)))
    settled = lagging_rover(spec.control_dt, latency_s=2 * spec.physics_dt)
    state = stepped.state_dict()
    targets = state["arrays"]["target_history"][0]
    state["arrays"]["target_history"] = np.stack([targets, targets, 0 * targets, 0 * targets, 0 * targets])
    state["arrays"]["drive_targets"][:] = 99.0  # what a log does not hold
    settled.load_state_dict(state)
    settled.settle_drives()
    want = stepped.state_dict()["arrays"]["drive_targets"]
    assert not np.allclose(want, targets)  # still lagging
    np.testing.assert_allclose(settled.state_dict()["arrays"]["drive_targets"], want, rtol=1e-12)


def test_rover_tracks_half_a_metre_per_second_within_ten_percent():
    twin = BatchedTwin("rover", num_envs=4, seed=0, randomization=NOMINAL).hold_commands()
    twin.reset()
    twin.set_commands(np.array([0.5, 0.0, 0.0]))
    controller = DiffDriveController(twin)
    speeds = []
    for step in range(200):  # 4 s
        twin.step(controller())
        if step >= 100:
            lin, _ = twin.task.base_velocities(twin.backend.state())
            speeds.append(lin[:, 0])
    assert np.mean(speeds) == pytest.approx(0.5, rel=0.1)


def test_rover_turns_left_for_positive_wz():
    twin = BatchedTwin("rover", num_envs=1, seed=0, randomization=NOMINAL).hold_commands()
    twin.reset()
    twin.set_commands(np.array([0.0, 0.0, 1.0]))
    controller = DiffDriveController(twin)
    for _ in range(100):
        twin.step(controller())
    assert twin.backend.state()["base_ang_vel"][0, 2] == pytest.approx(1.0, abs=0.15)


def test_quadruped_stands_five_seconds_at_default_pose():
    twin = BatchedTwin("quadruped", num_envs=4, seed=0)  # randomisation on, pushes included
    twin.reset()
    controller = StandController(twin)
    falls = 0
    for _ in range(int(5.0 / twin.spec.control_dt)):
        _, _, term, _, _ = twin.step(controller())
        falls += int(term.sum())
    assert falls == 0
    assert (twin.backend.state()["base_pos"][:, 2] > 0.25).all()


def test_nan_actions_become_the_safe_action_and_are_counted():
    twin = BatchedTwin("quadruped", num_envs=3, seed=0, randomization=NOMINAL)
    twin.reset()
    actions = np.zeros((3, 12))
    actions[1, 4] = np.nan
    actions[2, 0] = np.inf
    for _ in range(20):
        obs, _, term, _, info = twin.step(actions)
        assert info["nan_actions"] == 2
    assert twin.nan_action_count == 40
    assert np.isfinite(obs).all() and not term.any()
    state = twin.backend.state()
    assert np.allclose(state["joint_pos"][1], state["joint_pos"][0], atol=0.05)  # held the default pose


def test_wrong_action_shape_is_named():
    twin = BatchedTwin("rover", num_envs=2)
    twin.reset()
    with pytest.raises(ValueError, match=r"actions must have shape \(2, 2\)"):
        twin.step(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="num_envs"):
        BatchedTwin("rover", num_envs=0)


def test_unknown_backend_is_named():
    with pytest.raises(ValueError, match="unknown twin backend 'bullet'"):
        BatchedTwin("rover", num_envs=1, backend="bullet")


def test_sim_package_face_imports_on_first_use():
    code = (
        "import sys, sim.errors; assert 'mujoco' not in sys.modules, 'mujoco imported';"
        "from sim import *; import sim; assert all(getattr(sim, n) for n in sim.__all__);"
        "assert sim.__all__ == sorted(sim._EXPORTS), 'sim.__all__ and _EXPORTS differ';"
        "assert BatchedTwin.__module__ == 'sim.twin' and load_task.__module__ == 'sim.tasks.loader'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

"""The velocity task apart from the robot: the task YAMLs, their one reader and its errors, and the twin on a task
given as a YAML or as Python terms."""

import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml

from sim.errors import SimError
from sim.randomization import RandomizationConfig
from sim.robot import load_robot
from sim.tasks import FeetConfig, ResetConfig, RewardTerm, VelocityCommand, default_task, load_task, task_path
from sim.tasks.terms import REWARDS, TermContext
from sim.terrain import TerrainConfig
from sim.twin import BatchedTwin

NOMINAL = RandomizationConfig(enabled=False)


@pytest.fixture(scope="module")
def quadruped():
    return load_robot("quadruped")


def write(tmp_path, text: str):
    path = tmp_path / "task.yaml"
    path.write_text(text)
    return path


# The effective reward terms (weight, params) of each robot's task, pinned: the task YAMLs say only what differs
# from default_task, and a change to what a robot learns shows here.
LEGGED_GYM = {
    "tracking_lin_vel": (1.0, {"sigma": 0.25}),
    "tracking_ang_vel": (0.5, {"sigma": 0.25}),
    "lin_vel_z": (-2.0, {}),
    "ang_vel_xy": (-0.05, {}),
    "orientation": (-1.0, {}),
    "torques": (-1e-5, {}),
    "joint_acc": (-2.5e-7, {}),
    "action_rate": (-0.01, {}),
    "termination": (-5.0, {}),
}
EFFECTIVE_REWARDS = {
    "rover": LEGGED_GYM,
    "quadruped": {**LEGGED_GYM, "gait_phase_contact": (2.0, {}), "feet_slip": (-0.1, {})},
}


@pytest.mark.parametrize("name", ["rover", "quadruped"])
def test_each_robots_effective_reward_terms_are_pinned(name):
    task = load_task(load_robot(name))
    assert {k: (t.weight, t.params) for k, t in task.rewards.items()} == EFFECTIVE_REWARDS[name]
    assert [t.func for t in task.rewards.values()] == [REWARDS[k] for k in EFFECTIVE_REWARDS[name]]


def test_each_robot_has_its_task_yaml_and_it_is_read():
    quad, rover = load_robot("quadruped"), load_robot("rover")
    assert task_path(quad).name == "velocity_quadruped.yaml" and task_path(rover).name == "velocity_rover.yaml"
    q, r = load_task(quad), load_task(rover)
    assert (q.min_base_height, q.max_tilt_rad, q.episode_length_s, q.commands.resample_s) == (0.18, 1.0, 20.0, 10.0)
    assert (r.min_base_height, r.max_tilt_rad, r.episode_length_s, r.commands.resample_s) == (0.05, 0.8, 10.0, 5.0)
    assert list(r.observations) == [
        "base_lin_vel",
        "base_ang_vel",
        "projected_gravity",
        "velocity_command",
        "joint_vel",
        "last_action",
    ]
    # apart from the fall heights and the rover's shorter episodes and commands, both are the default task
    assert q == dataclasses.replace(default_task(quad), terminations=q.terminations)
    assert r == dataclasses.replace(
        default_task(rover), terminations=r.terminations, episode_length_s=10.0, commands=r.commands
    )
    assert q.feet.contact_force_n == 1.0 and q.only_positive_rewards and not r.only_positive_rewards


@pytest.mark.parametrize("name", ["rover", "quadruped"])
def test_every_entry_of_a_task_yaml_changes_the_task(tmp_path, name):
    # the YAMLs say only what differs from default_task: leaving out any entry changes the effective task (an entry
    # that restates a default would not)
    robot = load_robot(name)
    raw, task = yaml.safe_load(task_path(robot).read_text()), load_task(robot)
    entries = [(s, k) for s, v in raw.items() for k in (v if isinstance(v, dict) else [None])]
    for section, key in entries:
        rest = {s: v for s, v in raw.items() if s != section}
        if key is not None and len(raw[section]) > 1:  # one entry of a section left out, its siblings kept
            rest[section] = {k: v for k, v in raw[section].items() if k != key}
        assert load_task(robot, write(tmp_path, yaml.safe_dump(rest))) != task, (section, key)
    assert len(entries) == {"rover": 4, "quadruped": 1}[name]


def test_each_section_sets_what_it_names_over_the_default_task(tmp_path, quadruped):
    path = write(
        tmp_path,
        "observations: [base_ang_vel, projected_gravity, velocity_command, joint_pos, joint_vel, last_action]\n"
        "rewards:\n"
        "  torques: null\n"
        "  tracking_lin_vel: {params: {sigma: 0.5}}\n"
        "  pose: {weight: 1e-3, params: {joint_weights: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2]}}\n"
        "terminations: {tilted: null}\n"
        "commands: {resample_s: 5, ranges: {vx: [0.2, 0.6]}}\n"
        "episode_length_s: 10\n"
        "reset: {joint_pos_noise: 0.2}\n"
        "randomization: {friction: [0.3, 0.9]}\n"
        "feet: {contact_force_n: 3}\n"
        "terrain: {types: [stairs]}\n",
    )
    task, default = load_task(quadruped, path), default_task(quadruped)
    assert (
        " ".join(task.observations) == "base_ang_vel projected_gravity velocity_command joint_pos joint_vel last_action"
    )
    assert list(task.rewards) == [*(k for k in default.rewards if k != "torques"), "pose"]  # added at the end
    assert task.rewards["tracking_lin_vel"] == RewardTerm(REWARDS["tracking_lin_vel"], 1.0, {"sigma": 0.5})
    assert task.rewards["pose"] == RewardTerm(REWARDS["pose"], 0.001, {"joint_weights": (1.0,) * 11 + (2.0,)})
    assert list(task.terminations) == ["base_too_low"] and task.min_base_height == 0.1
    limits = dataclasses.replace(quadruped.command_limits, vx=(0.2, 0.6))  # vy and wz: the robot's
    assert task.commands == VelocityCommand(resample_s=5.0, stand_still_share=0.1, ranges=limits)
    assert task.reset == ResetConfig(joint_pos_noise=0.2, base_velocity_noise=0.05)
    assert task.randomization == dataclasses.replace(default.randomization, friction=(0.3, 0.9))
    assert task.feet == FeetConfig(contact_force_n=3.0) and task.terrain == TerrainConfig(types=("stairs",))
    assert task.episode_length_s == 10.0 and isinstance(task.episode_length_s, float)
    assert task.only_positive_rewards == default.only_positive_rewards


def task_show(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "120"}  # rich wraps a table to the terminal's width
    cmd = [sys.executable, "-m", "sim2real", "task", "show", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


def rows(text: str) -> dict[str, list[str]]:
    """A rich table's body rows by their first cell."""
    cells = [[c.strip() for c in line.strip("│ ").split("│")] for line in text.splitlines() if line.startswith("│")]
    return {row[0]: row[1:] for row in cells}


def test_task_show_prints_each_robots_effective_terms_marked_default_or_overridden():
    quad, rover = task_show("--robot", "quadruped"), task_show("--robot", "rover")
    assert quad.returncode == rover.returncode == 0, quad.stderr + rover.stderr
    q, r = rows(quad.stdout), rows(rover.stdout)
    assert q["gait_phase_contact"] == ["2", "-", "default"] and "gait_phase_contact" not in r
    assert q["torques"] == r["torques"] == ["-1e-05", "-", "default"]
    assert q["base_too_low"] == ["min_base_height=0.18", "overridden"] and q["tilted"][-1] == "default"
    assert r["tilted"] == ["max_tilt_rad=0.8", "overridden"]
    assert "only_positive_rewards" in quad.stdout and "only_positive_rewards" not in rover.stdout


def test_task_show_marks_what_a_task_yaml_overrides_adds_and_drops(tmp_path):
    path = write(tmp_path, "rewards:\n  lin_vel_z: {weight: -4.0}\n  torques: null\n  stand_still: {weight: -0.5}\n")
    shown = rows(task_show("--robot", "rover", "--task", str(path)).stdout)
    assert shown["lin_vel_z"] == ["-4", "-", "overridden"] and shown["torques"] == ["-", "-", "dropped"]
    assert shown["stand_still"][0] == "-0.5" and shown["stand_still"][-1] == "added"
    assert shown["tilted"] == ["max_tilt_rad=1.0", "default"]  # the given YAML replaces the rover's own


def test_task_show_help_has_examples(capsys):
    from sim2real.cli import main

    with pytest.raises(SystemExit):
        main(["task", "--help"])
    assert "examples:\n  sim2real task show --robot quadruped" in capsys.readouterr().out


def test_task_show_refuses_an_unknown_robot_in_one_line():
    shown = task_show("--robot", "no_such_robot")
    assert shown.returncode == 2 and shown.stdout == ""
    [line] = shown.stderr.splitlines()
    assert line.startswith("sim2real task: error: unknown robot 'no_such_robot'; known: ") and "rover" in line


def test_the_default_task_of_a_robot_with_feet_has_the_gait_terms(quadruped):
    # what a robot brought by `sim2real robot init` learns without a task YAML of its own: four feet in two diagonal
    # pairs trot on the gait clock, other feet get the air-time term
    legged, wheeled = default_task(quadruped), default_task(load_robot("rover"))
    assert legged.foot_terms == ["gait_phase_contact", "feet_slip"] and wheeled.foot_terms == []
    assert list(legged.observations)[-1] == "gait_phase" and "gait_phase" not in wheeled.observations
    assert legged.without_foot_terms().rewards == wheeled.rewards
    two_feet = default_task(dataclasses.replace(quadruped, feet=quadruped.feet[:2]))
    assert two_feet.foot_terms == ["feet_air_time", "feet_slip"] and "gait_phase" not in two_feet.observations


def test_robot_does_not_import_the_tasks():
    code = "import sys, sim.robot; assert not any(m.startswith('sim.tasks') for m in sys.modules), 'imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_weights_params_and_dropped_terms_change_what_the_twin_reports(tmp_path, quadruped):
    path = write(
        tmp_path,
        "rewards:\n"
        "  lin_vel_z: {weight: -4.0}\n"
        "  tracking_lin_vel: {params: {sigma: 0.5}}\n"
        "  torques: null\n"
        "  termination: {weight: 0.0}\n"
        "only_positive_rewards: false\n",  # the reward is then the plain sum of the terms
    )
    task = load_task(quadruped, path)
    assert task.rewards["tracking_lin_vel"].weight == 1.0 and task.rewards["tracking_lin_vel"].params == {"sigma": 0.5}
    assert "torques" not in task.rewards and task.min_base_height == 0.1  # the rest: default_task's

    def first_step(task_arg):
        twin = BatchedTwin(quadruped, num_envs=3, seed=5, task=task_arg, randomization=NOMINAL)
        twin.reset()
        _, rew, _, _, info = twin.step(np.full((3, 12), 0.5))
        return rew, info["reward_terms"]

    base_rew, base = first_step(default_task(quadruped))  # what the YAML edits
    rew, terms = first_step(path)
    assert set(base) - set(terms) == {"torques", "termination"}  # dropped, and turned off by a zero weight
    np.testing.assert_allclose(terms["lin_vel_z"], 2.0 * base["lin_vel_z"])
    assert not np.allclose(terms["tracking_lin_vel"], base["tracking_lin_vel"])
    np.testing.assert_allclose(rew, np.sum(list(terms.values()), axis=0), atol=1e-6)


def test_only_positive_rewards_clips_the_total_at_zero_and_a_fall_still_costs(tmp_path, quadruped):
    task = load_task(quadruped)  # legged_gym's clip: the default task's for a robot with feet
    assert task.only_positive_rewards and not load_task(load_robot("rover")).only_positive_rewards
    terms = {
        "tracking_lin_vel": np.array([0.02, 0.02, 0.0]),
        "lin_vel_z": np.array([-0.05, -0.01, -0.05]),
        "termination": np.array([0.0, 0.0, -0.1]),
    }
    np.testing.assert_allclose(task.total_reward(terms), [0.0, 0.01, -0.1])  # the fall is added after the clip
    plain = load_task(quadruped, write(tmp_path, "only_positive_rewards: false\n"))
    np.testing.assert_allclose(plain.total_reward(terms), [-0.03, 0.01, -0.15])

    twin = BatchedTwin(quadruped, num_envs=16, seed=3, randomization=NOMINAL)
    twin.reset()
    rng = np.random.default_rng(0)
    clipped = 0
    for _ in range(30):  # flailing: penalties outweigh tracking on many steps
        _, rew, _, _, info = twin.step(rng.uniform(-3, 3, (16, 12)))
        t = info["reward_terms"]
        fall = t["termination"]
        np.testing.assert_allclose(rew, np.maximum(np.sum(list(t.values()), axis=0) - fall, 0) + fall, atol=1e-6)
        clipped += int(np.sum(np.sum(list(t.values()), axis=0) - fall < 0))
    assert clipped > 0  # the clip was exercised


def test_a_term_written_in_python_is_rewarded(quadruped):
    def height(ctx: TermContext, target: float) -> np.ndarray:
        return -np.abs(ctx.state["base_pos"][:, 2] - target)

    task = load_task(quadruped)
    task = dataclasses.replace(task, rewards={**task.rewards, "height": RewardTerm(height, 2.0, {"target": 0.3})})
    twin = BatchedTwin(quadruped, num_envs=2, seed=0, task=task, randomization=NOMINAL)
    twin.reset()
    _, rew, _, _, info = twin.step(np.zeros((2, 12)))
    z = twin.backend.state()["base_pos"][:, 2]
    assert list(info["reward_terms"])[-1] == "height"
    np.testing.assert_allclose(info["reward_terms"]["height"], -np.abs(z - 0.3) * 2.0 * quadruped.control_dt)
    np.testing.assert_allclose(rew, np.sum(list(info["reward_terms"].values()), axis=0), atol=1e-6)


def test_stand_still_share_and_ranges_shape_the_commands(tmp_path, quadruped):
    def commands(text):
        twin = BatchedTwin(quadruped, num_envs=400, seed=1, task=write(tmp_path, text), randomization=NOMINAL)
        twin.reset()
        return twin.commands

    still = commands("commands: {stand_still_share: 1.0}")
    assert np.all(still == 0.0)
    moving = commands("commands: {stand_still_share: 0.0, ranges: {vx: [0.2, 0.6]}}")
    assert np.all((moving[:, 0] >= 0.2) & (moving[:, 0] <= 0.6))
    assert moving[:, 1].min() < -0.4 and moving[:, 1].max() > 0.4  # vy left out: the robot's whole [-0.5, 0.5]
    default = commands("{}")
    assert 0.05 < np.mean(np.all(default == 0.0, axis=1)) < 0.16  # the default tenth stand still


def test_a_duty_share_of_the_draws_comes_from_the_logged_commands(quadruped):
    """PPOConfig.duty_share of the command draws are rows of `duty`, weighted by their logged time and clipped to
    the command ranges; the others keep the task's uniform draws."""
    from training.ppo.config import PPOConfig

    duty = [[0.5, 0.0, 0.0, 3.0], [0.0, 0.0, 0.8, 1.0], [2.0, 0.0, 0.0, 0.0001]]

    def commands(share: float) -> np.ndarray:
        task = PPOConfig(robot="quadruped", duty=duty, duty_share=share).twin_task(load_task(quadruped))
        twin = BatchedTwin(quadruped, num_envs=2000, seed=3, task=task, randomization=NOMINAL)
        twin.reset()
        return twin.commands

    all_duty = commands(1.0)
    rows = [tuple(r) for r in np.unique(all_duty, axis=0)]
    assert set(rows) <= {(0.5, 0.0, 0.0), (0.0, 0.0, 0.8), (1.0, 0.0, 0.0)}  # 2.0 m/s clipped to vx's 1.0
    assert 0.70 < np.mean(np.all(all_duty == [0.5, 0.0, 0.0], axis=1)) < 0.80  # 3 of every 4 logged seconds
    half = commands(0.5)
    from_duty = np.isin(half[:, 2], [0.0, 0.8]) & np.isin(half[:, 0], [0.0, 0.5])
    assert 0.45 < from_duty.mean() < 0.62  # half, and the uniform draws' tenth that stand still
    assert commands(0.0)[:, 2].std() > 0.5  # uniform over wz's [-1, 1]


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"duty_share": 0.5}, "duty_share needs duty"),
        ({"duty": [[0.5, 0.0, 0.0]]}, r"each row is \[vx, vy, wz, weight >= 0\]"),
        ({"duty": [[0.5, 0.0, 0.0, 0.0]]}, "the weights may not all be 0"),
        ({"duty": [[0.5, 0.0, 0.0, 1.0]], "duty_share": 1.5}, "duty_share"),
    ],
)
def test_a_duty_without_commands_or_weights_is_refused(settings, message):
    from training.ppo.config import ConfigError, PPOConfig

    with pytest.raises(ConfigError, match=message):
        PPOConfig.from_dict({"robot": "quadruped", **settings})


def test_reward_scales_multiply_their_terms_weights_and_name_the_terms_of_a_task_without_them(quadruped):
    """PPOConfig.reward_scales (a fine-tuning's emphasis on what drifted) multiplies the named terms' weights in the
    twin's task; the others keep theirs, and an unknown term is refused with the task's terms named."""
    from training.ppo.config import ConfigError, PPOConfig

    task = load_task(quadruped)
    scaled = PPOConfig(robot="quadruped", reward_scales={"tracking_ang_vel": 2.0}).twin_task(task)
    assert scaled.rewards["tracking_ang_vel"].weight == 2.0 * task.rewards["tracking_ang_vel"].weight != 0
    assert {k: t for k, t in scaled.rewards.items() if k != "tracking_ang_vel"} == {
        k: t for k, t in task.rewards.items() if k != "tracking_ang_vel"
    }
    assert PPOConfig(robot="quadruped").twin_task(task).rewards == task.rewards
    with pytest.raises(ConfigError, match="no reward term 'yaw'; its terms: tracking_lin_vel, tracking_ang_vel"):
        PPOConfig(robot="quadruped", reward_scales={"yaw": 2.0}).twin_task(task)
    with pytest.raises(ConfigError, match="reward_scales"):
        PPOConfig.from_dict({"robot": "quadruped", "reward_scales": {"tracking_ang_vel": -1.0}})


def test_resampling_follows_the_task_period(tmp_path, quadruped):
    twin = BatchedTwin(quadruped, num_envs=2, seed=0, task=write(tmp_path, "commands: {resample_s: 0.1}"))
    twin.reset()
    seen = [twin.commands.copy()]
    for _ in range(10):  # 0.2 s: two redraws at 5 steps each
        twin.step(np.zeros((2, 12)))
        seen.append(twin.commands.copy())
    changed = [t for t in range(1, 11) if not np.array_equal(seen[t], seen[t - 1])]
    assert changed == [5, 10]


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "rewards: {style: {weight: 1.0}}",
            r"task.yaml: rewards keys must be among tracking_lin_vel, .*: unknown reward term\(s\) style$",
        ),
        (
            "rewards: {torques: {wieght: 1.0}}",
            r"task.yaml: unknown key\(s\) wieght in rewards.torques \(did you mean weight\?\)",
        ),
        ("rewards: {tracking_lin_vel: {params: {sgma: 1}}}", r"rewards.tracking_lin_vel.params: unknown sgma"),
        ("rewards: {torques: {weight: heavy}}", r"rewards.torques.weight must be a number, got 'heavy'"),
        ("rewards: {torques: -1.0}", r"rewards.torques must be a mapping"),
        (
            "terminations: {fell: {params: {}}}",
            r"terminations keys must be among base_too_low, tilted: unknown termination term\(s\) fell",
        ),
        (
            "terminations: {tilted: {params: {max_tilt_rad: null}}}",
            r"terminations.tilted.params.max_tilt_rad must be a number or a list of numbers, got None",
        ),
        (
            "observations: [base_lin_vel, lidar]",
            r"observations items must be among base_lin_vel, .*: unknown observation term\(s\) lidar",
        ),
        ("commands: {ranges: {vx: [-2.0, 1.0]}}", r"commands.ranges.vx \[-2.0, 1.0\] is outside robot 'quadruped'"),
        (
            "commands: {ranges: {vx: [0.6, 0.2]}}",
            r"task.yaml: commands.ranges: vx must be \[low, high\] with low <= high, got \[0.6, 0.2\]",
        ),
        (
            "randomization: {latency_s: [0.02, 0.01]}",
            r"task.yaml: randomization: latency_s must be \[low, high\] with low",
        ),
        ("observations: [joint_vel, joint_vel]", r"observations items must be distinct: joint_vel repeated"),
        ("rewards: {stand_still: {params: {}}}", r"task.yaml: rewards.stand_still: a new reward term needs a weight"),
        ("reset: {joint_pos_noise: -1}", r"task.yaml: reset.joint_pos_noise must be a non-negative number"),
        (
            "commands: {ranges: {vz: [0, 1]}}",
            r"task.yaml: unknown key\(s\) vz in commands.ranges; CommandLimits takes vx, vy, wz",
        ),
        ("commands: {stand_still_share: 2}", r"task.yaml: commands.stand_still_share must be in \[0, 1\], got 2.0"),
        ("commands: {heading: true}", r"task.yaml: unknown key\(s\) heading in commands"),
        (
            "randomization: {friction: high}",
            r"task.yaml: randomization.friction must be a list of 2 numbers, got 'high'",
        ),
        ("reset: {yaw: 1.0}", r"task.yaml: unknown key\(s\) yaw in reset"),
        ("episode_length_s: 0", r"task.yaml: episode_length_s must be a positive number, got 0.0"),
        ("only_positive_rewards: 1", r"task.yaml: only_positive_rewards must be true or false, got 1"),
        ("feet: {contact_force_n: 0}", r"task.yaml: feet.contact_force_n must be a positive number, got 0.0"),
        ("feet: {threshold: 1}", r"task.yaml: unknown key\(s\) threshold in feet"),
        ("rewards: {pose: {weight: 1, params: {joint_weights: [1, 2]}}}", r"joint_weights: 2 values for robot .* 12"),
        ("curriculum: {}", r"task.yaml: unknown key\(s\) curriculum; TaskSections takes observations, rewards"),
        ("- rewards", r"task.yaml: expected a mapping of task sections"),
    ],
)
def test_bad_task_yaml_is_one_error_naming_the_file_and_field(tmp_path, quadruped, text, message):
    with pytest.raises(SimError, match=message):
        load_task(quadruped, write(tmp_path, text))


def test_missing_task_file_is_named(tmp_path, quadruped):
    with pytest.raises(SimError, match="task config .*nowhere.yaml does not exist"):
        BatchedTwin(quadruped, num_envs=1, task=tmp_path / "nowhere.yaml")


def test_a_python_task_is_checked_against_the_robot(quadruped):
    task = default_task(quadruped)
    bad = dataclasses.replace(task, rewards={"lin_vel_z": RewardTerm(REWARDS["lin_vel_z"], -1.0, {"scale": 2.0})})
    with pytest.raises(SimError, match=r"task config: rewards.lin_vel_z.params: unknown scale"):
        BatchedTwin(quadruped, num_envs=1, task=bad)
    missing = dataclasses.replace(task, rewards={"t": RewardTerm(REWARDS["tracking_lin_vel"], 1.0)})
    with pytest.raises(SimError, match=r"rewards.t.params: missing sigma"):
        BatchedTwin(quadruped, num_envs=1, task=missing)

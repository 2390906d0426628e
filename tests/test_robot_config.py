"""Bring-your-own robot (MJCF + short YAML, optionally its own task YAML) and the errors a user sees for bad robot
files."""

import json
import subprocess
import sys
from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml

from edge.manifest import ActionLimits, build_manifest
from edge.observation import obs_term
from sim.controllers import StandController
from sim.robot import CommandLimits, RobotConfigError, build_model, load_robot
from sim.twin import BatchedTwin

# A small hexapod-free, wheel-free robot a user might bring: a 3 kg box on four 2-joint legs.
USER_MJCF = """
<mujoco model="crawler">
  <option timestep="0.004"/>
  <default>
    <geom contype="1" conaffinity="0" friction="1 0.005 0.0001"/>
    <joint range="-1.5 1.5" damping="0.05"/>
  </default>
  <worldbody>
    <geom name="ground" type="plane" size="0 0 1" contype="0" conaffinity="1"/>
    <body name="body" pos="0 0 0.2">
      <freejoint/>
      <geom type="box" size="0.15 0.1 0.03" mass="3"/>
      {legs}
    </body>
  </worldbody>
</mujoco>
"""
LEG = """
      <body name="{n}_upper" pos="{x} {y} 0">
        <joint name="{n}_hip" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.08" size="0.015" mass="0.2"/>
        <body name="{n}_lower" pos="0 0 -0.08">
          <joint name="{n}_knee" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0 0 -0.08" size="0.015" mass="0.1"/>
          <geom type="sphere" pos="0 0 -0.08" size="0.02" mass="0.02"/>
        </body>
      </body>"""
LEGS = {"fl": (0.12, 0.08), "fr": (0.12, -0.08), "rl": (-0.12, 0.08), "rr": (-0.12, -0.08)}


def write_user_robot(tmp_path: Path, **overrides) -> Path:
    legs = "".join(LEG.format(n=n, x=x, y=y) for n, (x, y) in LEGS.items())
    (tmp_path / "crawler.xml").write_text(USER_MJCF.format(legs=legs))
    joints = [f"{n}_{j}" for n in LEGS for j in ("hip", "knee")]
    cfg = {
        "name": "crawler",
        "mjcf": "crawler.xml",
        "base_body": "body",
        "joints": joints,
        "default_pose": [0.3, -0.6] * 4,
        "kp": 8.0,
        "kd": 0.2,
        "torque_limit": 4.0,
        "base_height": 0.2,
        "sim_dt": 0.004,
        "decimation": 5,
        "command_limits": {"vx": [-0.3, 0.3], "wz": [-0.5, 0.5]},
        **overrides,
    }
    path = tmp_path / "crawler.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


# the crawler's own task: a lower fall height than the default task's 0.1 m, slower commands than its envelope
USER_TASK = """
episode_length_s: 5.0
commands: {resample_s: 2.0, ranges: {vx: [-0.2, 0.2]}}
terminations:
  base_too_low: {params: {min_base_height: 0.06}}
"""


def test_user_robot_gives_a_working_twin(tmp_path):
    spec = load_robot(write_user_robot(tmp_path))
    assert spec.num_actions == 8 and spec.control_dt == pytest.approx(0.02)
    (tmp_path / "crawler_task.yaml").write_text(USER_TASK)
    twin = BatchedTwin(spec, num_envs=4, seed=0, task=tmp_path / "crawler_task.yaml")
    assert twin.task.cfg.min_base_height == 0.06 and twin.max_episode_steps == 250
    obs, _ = twin.reset()
    assert obs.shape == (4, 12 + 3 * 8)
    assert np.all(np.abs(twin.commands[:, 0]) <= 0.2) and np.all(twin.commands[:, 1] == 0.0)
    controller = StandController(twin)
    falls = 0
    for _ in range(100):  # 2 s standing under PD
        _, _, term, _, _ = twin.step(controller())
        falls += int(term.sum())
    assert falls == 0
    assert np.isfinite(twin.backend.state()["joint_pos"]).all()


def test_per_joint_gains(tmp_path):
    """kp/kd as one value per joint: the same list of equal values runs exactly as the scalar does, and a list
    of different ones reaches the MuJoCo actuators and the manifest."""

    def rollout(spec):
        twin = BatchedTwin(spec, num_envs=4, seed=0, nthread=1)  # randomisation on: kp_scale, kd_scale per env
        twin.reset(seed=0)
        controller = StandController(twin)
        for _ in range(20):
            twin.step(controller())
        return twin.backend.raw_state()

    scalar = load_robot(write_user_robot(tmp_path))
    listed = load_robot(write_user_robot(tmp_path, kp=[8.0] * 8, kd=[0.2] * 8))
    assert listed.kp == (8.0,) * 8 and scalar.kp == 8.0
    np.testing.assert_array_equal(rollout(scalar), rollout(listed))

    kp, kd = [8.0, 12.0] * 4, [0.2, 0.3] * 4
    spec = load_robot(write_user_robot(tmp_path, kp=kp, kd=kd))
    twin = BatchedTwin(spec, num_envs=1, seed=0, nthread=1)
    twin.reset()
    model = twin.backend.model(0)
    params = twin.params
    np.testing.assert_allclose(
        model.actuator_gainprm[:, 0], params.motor_strength[0] * params.kp_scale[0] * np.array(kp)
    )
    np.testing.assert_allclose(
        -model.actuator_biasprm[:, 2], params.motor_strength[0] * params.kd_scale[0] * np.array(kd)
    )
    manifest = build_manifest(
        spec.to_dict(),
        [obs_term("joint_pos", 8)],
        onnx_sha256="0" * 64,
        run_id="r",
        opset=17,
        limits=ActionLimits(clip_actions=10.0),
    )
    assert manifest.control["kp"] == kp and manifest.control["kd"] == kd


def test_missing_joint_is_named(tmp_path):
    path = write_user_robot(tmp_path)
    cfg = yaml.safe_load(path.read_text())
    cfg["joints"][3] = "fr_ankle"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(RobotConfigError, match="fr_ankle.*not in the MJCF"):
        load_robot(path)


def test_malformed_mjcf_is_named(tmp_path):
    path = write_user_robot(tmp_path)
    (tmp_path / "crawler.xml").write_text("<mujoco><worldbody><body></worldbody>")
    with pytest.raises(RobotConfigError, match="crawler.xml: malformed MJCF"):
        load_robot(path)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"default_pose": [0.0, 0.0]}, "crawler.yaml: default_pose needs 8 values"),
        ({"base_body": "torso"}, "base_body 'torso' is not in the MJCF"),
        ({"control_mode": "impedance"}, "crawler.yaml: control_mode must be one of position, velocity, torque, got"),
        (
            {"command_limits": {"vx": [1.0, -1.0]}},
            "crawler.yaml: command_limits: vx must be \\[low, high\\] with low <=",
        ),
        ({"command_limits": {"vx": [1.0]}}, "crawler.yaml: command_limits.vx must be a list of 2 numbers"),
        ({"mjcf": "nowhere.xml"}, "crawler.yaml: MJCF nowhere.xml not found"),
        ({"wheel_radius": 0.1}, "crawler.yaml: unknown key\\(s\\) wheel_radius; RobotConfig takes name, mjcf"),
        ({"rewards": {"torques": -1.0}}, "unknown key\\(s\\) rewards \\(rewards: the task's now"),
        ({"termination": {}, "episode_length_s": 5}, "episode_length_s, termination: the task's now"),
        ({"torque_limit": [1.0, float("nan")] * 4}, "crawler.yaml: torque_limit\\[1\\] must be a finite number"),
        ({"torque_limit": 0.0}, "crawler.yaml: torque_limit must be a positive number"),
        ({"kp": [8.0, 8.0]}, "crawler.yaml: kp needs 8 values"),
        ({"kp": "stiff"}, "crawler.yaml: kp must be a number or a list of numbers, got 'stiff'"),
        ({"kd": [0.2] * 7 + [-0.1]}, "crawler.yaml: kd must be a non-negative number, got -0.1"),
        ({"decimation": 0}, "crawler.yaml: decimation must be a positive integer"),
        ({"name": ""}, "crawler.yaml: name must have at least 1 character"),
        ({"joints": ["fl_hip"] * 8}, "crawler.yaml: joints items must be distinct: fl_hip repeated"),
        ({"feet": [""]}, "foot geom\\(s\\) '' named in the robot YAML are not in the MJCF"),
    ],
)
def test_bad_robot_yaml_is_named(tmp_path, overrides, message):
    with pytest.raises(RobotConfigError, match=message):
        load_robot(write_user_robot(tmp_path, **overrides))


def test_one_value_for_all_joints_and_defaults(tmp_path):
    """A scalar pose or torque limit is one per joint in the spec (kp and kd stay as given, for the manifest);
    keys left out take RobotConfig's defaults."""
    spec = load_robot(write_user_robot(tmp_path, default_pose=0.1, command_limits={"vx": [-0.3, 0.3]}))
    assert spec.default_pose == (0.1,) * 8 and spec.torque_limit == (4.0,) * 8 and spec.kp == 8.0
    assert (spec.control_mode, spec.safe_mode, spec.action_scale, spec.feet) == ("position", "hold", 0.25, ())
    assert spec.command_limits == CommandLimits(vx=(-0.3, 0.3), vy=(0.0, 0.0), wz=(-1.0, 1.0))


@pytest.mark.parametrize("robot", ["rover", "quadruped"])
def test_a_run_snapshot_of_the_robot_loads_back_to_it(tmp_path, robot):
    """training.ppo.launch writes the robot as resolved (RobotSpec.to_dict) beside a run: the same keys, so it
    loads again as the same robot."""
    spec = load_robot(robot)
    (tmp_path / "robot.yaml").write_text(yaml.safe_dump(json.loads(json.dumps(spec.to_dict())), sort_keys=False))
    assert load_robot(tmp_path / "robot.yaml") == spec


def test_unknown_robot_lists_the_known_ones():
    with pytest.raises(RobotConfigError, match="known: quadruped, rover"):
        load_robot("hexapod")


def test_cli_prints_one_line_without_traceback(tmp_path):
    path = write_user_robot(tmp_path, joints=[f"nope{i}" for i in range(8)])
    out = subprocess.run(
        [sys.executable, "-m", "sim2real", "demo", "--robot", str(path), "--seconds", "0.1"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "nope" in lines[0] and "Traceback" not in out.stderr


def test_cli_demo_runs_a_user_robot(tmp_path):
    path = write_user_robot(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "sim2real", "demo", "--robot", str(path), "--envs", "4", "--seconds", "0.5"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "crawler" in out.stdout


@pytest.mark.parametrize(
    ("physics", "message"),
    [
        ({"solver": "fast"}, "crawler.yaml: physics.solver must be one of newton, cg, pgs"),
        ({"iterations": 0}, "crawler.yaml: physics.iterations must be a positive integer"),
        ({"substeps": 0}, "crawler.yaml: physics.substeps must be a positive integer"),
        ({"contacts": "feet"}, "physics contacts feet needs the robot's feet: list them under feet:"),
    ],
)
def test_bad_physics_options_are_named(tmp_path, physics, message):
    with pytest.raises(RobotConfigError, match=message):
        load_robot(write_user_robot(tmp_path, physics=physics))


def test_cheaper_physics_reaches_the_model_and_campaigns_judge_the_mjcfs_own(tmp_path):
    """A robot YAML's physics section sets MuJoCo's options and turns off the collisions it leaves out; the spec
    campaigns and the SIL robot use (with_mjcf_physics) has the MJCF's own again."""
    raw = yaml.safe_load((Path("config/robots/quadruped.yaml")).read_text())
    fast = {"solver": "pgs", "iterations": 10, "cone": "pyramidal", "integrator": "implicitfast"}
    models = {}
    for contacts in ("all", "feet", "feet_and_base"):
        path = tmp_path / f"quadruped_{contacts}.yaml"
        path.write_text(yaml.safe_dump({**raw, "physics": {**fast, "contacts": contacts}}))
        spec = load_robot(path)
        models[contacts] = build_model(spec)
    own = build_model(spec.with_mjcf_physics())
    original = build_model(load_robot("quadruped"))
    m = models["feet"]
    assert (m.opt.solver, m.opt.iterations) == (mujoco.mjtSolver.mjSOL_PGS, 10)
    assert (m.opt.cone, m.opt.integrator) == (mujoco.mjtCone.mjCONE_PYRAMIDAL, mujoco.mjtIntegrator.mjINT_IMPLICITFAST)
    base = m.body(spec.base_body).id
    robot_geoms = [g for g in range(m.ngeom) if m.geom_bodyid[g] != 0]
    colliding = {
        contacts: {g for g in robot_geoms if model.geom_contype[g] or model.geom_conaffinity[g]}
        for contacts, model in models.items()
    }
    feet = {m.geom(f).id for f in spec.feet}
    assert colliding["feet"] == feet
    assert colliding["feet_and_base"] == feet | {g for g in robot_geoms if m.geom_bodyid[g] == base}
    assert len(colliding["all"]) > len(colliding["feet_and_base"])
    for field in ("solver", "iterations", "cone", "integrator"):
        assert getattr(own.opt, field) == getattr(original.opt, field)
    assert np.array_equal(own.geom_contype, original.geom_contype)
    twin = BatchedTwin(spec, num_envs=4, seed=0)
    twin.reset()
    obs, *_ = twin.step(np.zeros((4, spec.num_actions)))
    assert np.all(np.isfinite(obs))
